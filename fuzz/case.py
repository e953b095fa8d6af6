"""The Case: one frozen value that fully describes a differential case.

Everything a target call needs is either a field here or built from `seed` (fuzz.generate.values: tensors made on
the device from the seed, the same bits on every device; never element by element through Hypothesis).
`repr(case)` is a one-line
coordinate that `Case.parse` turns back into the same Case, so a failure message is a reproduction.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Literal

import torch

Op = Literal["decode", "verify", "prefill"]
DTYPES = ("fp32", "bf16", "fp16")
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
DTYPE_NAMES = {v: k for k, v in TORCH_DTYPES.items()}


@dataclass(frozen=True)
class Case:
    op: Op
    H: int
    HV: int
    K: int
    V: int
    T: int  # tokens per request (decode: 1; prefill: the longest sequence)
    pool: int  # slots in the state pool
    read_slots: tuple[int, ...]  # one per request; padding uses the target's sentinel
    seed: int
    seqlens: tuple[int, ...] = ()  # prefill only: tokens per sequence
    write_slots: tuple[int, ...] | None = None  # split read/write pools
    token_slots: tuple[tuple[int, ...], ...] | None = None  # per-token scatter [B][T]
    pool_gap: int = 0  # > 0: the pool is a strided view, each slot followed by pool_gap spare heads
    inter_rows: int = 0  # intermediate-state buffer rows (0: no buffer)
    inter_steps: int = 0  # its step capacity (>= T)
    inter_spare_steps: int = 0  # > 0: the buffer is a sliced view [:, :inter_steps] of a wider one
    inter_index: tuple[int, ...] | None = None  # explicit row per request (None: batch row)
    state_dtype: str = "fp32"
    input_dtype: str = "bf16"
    index_dtype: str = "i32"
    layout: Literal["vk", "kv"] = "vk"
    gate: str = "mild"  # gate regime, see fuzz.generate.materialize.GATE_REGIMES
    scale: float | None = None
    l2norm: bool = True
    update: bool = True  # False: disable_state_update
    null: int = -1  # the padding sentinel this case was drawn for (-1, or 0 as a null slot)
    # > 0: the target first runs this case, unjudged, on a pool warm_pool slots larger, so that a compile cache keyed
    # without the pool's capacity serves the judged call a kernel built for the other pool
    warm_pool: int = 0

    @property
    def B(self) -> int:
        return len(self.read_slots)

    @property
    def padded(self) -> tuple[bool, ...]:
        return tuple(s < 0 if self.null < 0 else s <= 0 for s in self.read_slots)

    @property
    def valid(self) -> bool:
        """Inputs every target must accept; an invalid case expects a clean rejection."""
        return self.HV % self.H == 0

    @property
    def tokens(self) -> tuple[int, ...]:
        """Tokens per request."""
        return self.seqlens if self.op == "prefill" else (self.T,) * self.B

    # --- the coordinate -------------------------------------------------------------------------
    def __repr__(self) -> str:
        parts = [self.op, f"B{self.B}", f"T{self.T}", f"H{self.H}", f"HV{self.HV}", f"K{self.K}", f"V{self.V}",
                 f"pool{self.pool}", f"pad{sum(self.padded)}", f"{self.state_dtype}state", f"{self.input_dtype}in",
                 self.index_dtype, self.layout, f"gate_{self.gate}", f"seed{self.seed}", f"slots{_l(self.read_slots)}"]
        opt = [
            (self.seqlens, f"seqlens{_l(self.seqlens)}"),
            (self.write_slots is not None, f"wslots{_l(self.write_slots or ())}"),
            (self.token_slots is not None, "tslots" + _l(["/".join(map(str, r)) for r in self.token_slots or ()])),
            (self.pool_gap, f"gap{self.pool_gap}"),
            (self.inter_rows, f"inter{self.inter_rows}x{self.inter_steps}+{self.inter_spare_steps}"),
            (self.inter_index is not None, f"rows{_l(self.inter_index or ())}"),
            (self.scale is not None, f"scale{self.scale}"),
            (not self.l2norm, "nol2"),
            (not self.update, "noupdate"),
            (self.null != -1, f"null{self.null}"),
            (self.warm_pool, f"warm{self.warm_pool}"),
        ]
        return "-".join(parts + [text for on, text in opt if on])

    @classmethod
    def parse(cls, coordinate: str) -> Case:
        """Inverse of repr: 'decode-B2-T1-...-seed7-slots[3,-1]' -> Case."""
        tokens = re.split(r"-(?![^\[]*\])", coordinate.strip())
        f: dict = {"op": tokens[0]}
        for tok in tokens[1:]:
            f.update(_parse_token(tok))
        return cls(**f)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Case:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"Case: unknown field(s) {sorted(unknown)}")
        fix = {k: _tuples(v) for k, v in data.items()}
        return cls(**fix)

    def replace(self, **changes) -> Case:
        return dataclasses.replace(self, **changes)


def _l(xs) -> str:
    return "[" + ",".join(map(str, xs)) + "]"


def _ints(body: str) -> tuple[int, ...]:
    return tuple(int(x) for x in body.strip("[]").split(",") if x != "")


_INT_FIELDS = {"T": "T", "H": "H", "HV": "HV", "K": "K", "V": "V", "pool": "pool", "seed": "seed", "gap": "pool_gap",
               "null": "null", "warm": "warm_pool"}


def _parse_token(tok: str) -> dict:
    if m := re.fullmatch(r"(T|HV|H|K|V|pool|seed|gap|null|warm)(-?\d+)", tok):
        return {_INT_FIELDS[m[1]]: int(m[2])}
    if m := re.fullmatch(r"(slots|wslots|seqlens|rows)(\[.*\])", tok):
        key = {"slots": "read_slots", "wslots": "write_slots", "seqlens": "seqlens", "rows": "inter_index"}[m[1]]
        return {key: _ints(m[2])}
    if m := re.fullmatch(r"tslots\[(.*)\]", tok):
        return {"token_slots": tuple(tuple(int(x) for x in r.split("/") if x) for r in m[1].split(",") if r)}
    if m := re.fullmatch(r"inter(\d+)x(\d+)\+(\d+)", tok):
        return {"inter_rows": int(m[1]), "inter_steps": int(m[2]), "inter_spare_steps": int(m[3])}
    if m := re.fullmatch(r"(fp32|bf16|fp16)(state|in)", tok):
        return {"state_dtype" if m[2] == "state" else "input_dtype": m[1]}
    if tok in ("i32", "i64"):
        return {"index_dtype": tok}
    if tok in ("vk", "kv"):
        return {"layout": tok}
    if tok.startswith("gate_"):
        return {"gate": tok[5:]}
    if tok.startswith("scale"):
        return {"scale": float(tok[5:])}
    if tok == "nol2":
        return {"l2norm": False}
    if tok == "noupdate":
        return {"update": False}
    if re.fullmatch(r"B\d+|pad\d+", tok):
        return {}  # derived from the slots
    raise ValueError(f"Case coordinate: unknown token {tok!r}")


def _tuples(v):
    if isinstance(v, list):
        return tuple(_tuples(x) for x in v)
    return v

