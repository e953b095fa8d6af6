"""The Case: one frozen value that fully describes a differential case.

Everything a target call needs is either a field here or built from `seed` (fuzz.model.values: tensors made on
the device from the seed, the same bits on every device; never element by element through Hypothesis).
`repr(case)` is a one-line coordinate that `Case.parse` turns back into the same Case, so a failure message is a
reproduction.

A Case that cannot exist is not constructible: `__post_init__` raises CaseError, one line naming the field or
coordinate token at fault, for anything the oracle could not judge or the coordinate could not spell (an unknown op,
dtype or decay regime, a slot outside the pool, slot lists that disagree with B or T, a decode with T > 1, ...). An
*invalid input* is still a Case: HV not a multiple of H (`valid` is False) is one the target must reject cleanly.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Literal

import torch

from fuzz.model.engines import EDGES

Op = Literal["decode", "verify", "prefill"]
OPS = ("decode", "verify", "prefill")
DTYPES = ("fp32", "bf16", "fp16")
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
DTYPE_NAMES = {v: k for k, v in TORCH_DTYPES.items()}
INDEX_DTYPES = ("i32", "i64")
TORCH_INDEX_DTYPES = {"i32": torch.int32, "i64": torch.int64}
LAYOUTS = ("vk", "kv")
# The decay regimes a case may name; fuzz.model.regimes.DECAY_REGIMES gives each its parameters. "mixed": a regime per
# value head.
DECAY_NAMES = ("mild", "nodecay", "forget", "threshold", "saturated", "negsat")
DECAYS = (*DECAY_NAMES, "mixed")
NULLS = (-1, 0)
SEEDS = 2**32  # fuzz.model.values keeps 32 bits of a seed: a larger one would name the same tensors


class CaseError(ValueError):
    """A Case that cannot exist, or a coordinate that names none; the message is one line naming the culprit."""


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
    inter_index: tuple[int, ...] | None = None  # explicit row per request (None: batch row; negative: none)
    state_dtype: str = "fp32"
    input_dtype: str = "bf16"
    index_dtype: str = "i32"
    layout: Literal["vk", "kv"] = "vk"
    decay: str = "mild"  # decay regime (how A_log, a + dt_bias and b are drawn), one of DECAYS
    scale: float | None = None
    l2norm: bool = True
    update: bool = True  # False: disable_state_update
    null: int = -1  # the padding sentinel this case was drawn for (-1, or 0 as a null slot)
    # > 0: the target first runs this case, unjudged, on a pool warm_pool slots larger, so that a compile cache keyed
    # without the pool's capacity serves the judged call a kernel built for the other pool
    warm_pool: int = 0
    output_given: bool = True  # False: output=None, the library allocates the buffer it returns
    # vLLM: per request, the accepted count of the previous step; the kernel reads its starting state from
    # token_slots[n][accepted[n] - 1], which read_slots[n] names (the null slot where the row is skipped: a padded
    # row, accepted 1, or an out-of-range count, an edge)
    accepted: tuple[int, ...] | None = None
    edge: str | None = None  # the contract edge this case probes (fuzz.model.engines.EDGES), None: none

    def __post_init__(self):
        if problem := _problem(self):
            raise CaseError(f"Case: {problem}")

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

    def size_key(self) -> tuple:
        """Smaller first: the order in which a shrunk case is the better reproduction (B, T, pool, coordinate)."""
        return self.B, self.T, self.pool, len(repr(self))

    # --- the coordinate -------------------------------------------------------------------------
    def __repr__(self) -> str:
        parts = [
            self.op,
            f"B{self.B}",
            f"T{self.T}",
            f"H{self.H}",
            f"HV{self.HV}",
            f"K{self.K}",
            f"V{self.V}",
            f"pool{self.pool}",
            f"pad{sum(self.padded)}",
            f"{self.state_dtype}state",
            f"{self.input_dtype}in",
            self.index_dtype,
            self.layout,
            f"decay_{self.decay}",
            f"seed{self.seed}",
            f"slots{_l(self.read_slots)}",
        ]
        opt = [
            (self.seqlens, f"seqlens{_l(self.seqlens)}"),
            (self.write_slots is not None, f"wslots{_l(self.write_slots or ())}"),
            (self.token_slots is not None, f"tslots{_tslots(self.token_slots or ())}"),
            (self.pool_gap, f"gap{self.pool_gap}"),
            (self.inter_rows, _inter(self)),
            (self.inter_index is not None, f"rows{_l(self.inter_index or ())}"),
            (self.scale is not None, f"scale{self.scale}"),
            (not self.l2norm, "nol2"),
            (not self.update, "noupdate"),
            (self.null != -1, f"null{self.null}"),
            (self.warm_pool, f"warm{self.warm_pool}"),
            (not self.output_given, "noout"),
            (self.accepted is not None, f"acc{_l(self.accepted or ())}"),
            (self.edge is not None, f"edge_{(self.edge or '').replace('-', '_')}"),
        ]
        return "-".join(parts + [text for on, text in opt if on])

    @classmethod
    def parse(cls, coordinate: str) -> Case:
        """Inverse of repr: 'decode-B2-T1-...-seed7-slots[3,-1]' -> Case. Raises CaseError naming the bad token."""
        op, *tokens = re.split(r"-(?![^\[]*\])", coordinate.strip())
        if op not in OPS:
            raise CaseError(f"Case coordinate: unknown op {op!r}; expected one of {', '.join(OPS)}")
        fields: dict = {"op": op}
        spelled: dict = {}  # field -> the token that set it
        for tok in tokens:
            parsed = _parse_token(tok)
            for name in parsed:
                if name in spelled:
                    raise CaseError(f"Case coordinate: {tok!r} repeats {spelled[name]!r}")
                spelled[name] = tok
            fields.update(parsed)
        if missing := [token for name, token in _REQUIRED.items() if name not in fields]:
            raise CaseError(f"Case coordinate: missing {', '.join(missing)}")
        claimed = {name: fields.pop(name) for name in ("B", "pad") if name in fields}  # derived: must agree
        case = cls(**fields)
        for name, actual in (("B", case.B), ("pad", sum(case.padded))):
            if claimed.get(name, actual) != actual:
                raise CaseError(
                    f"Case coordinate: {spelled[name]!r} disagrees with slots{_l(case.read_slots)} ({name}{actual})"
                )
        return case

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Case:
        if not isinstance(data, dict):
            raise CaseError(f"Case: expected a JSON object of fields, got {type(data).__name__}")
        fields = dataclasses.fields(cls)
        if unknown := sorted(set(data) - {f.name for f in fields}):
            raise CaseError(f"Case: unknown field(s) {unknown}")
        if missing := [f.name for f in fields if f.default is dataclasses.MISSING and f.name not in data]:
            raise CaseError(f"Case: missing field(s) {missing}")
        return cls(**{k: _tuples(v) for k, v in data.items()})

    def replace(self, **changes) -> Case:
        return dataclasses.replace(self, **changes)


def _l(xs) -> str:
    return "[" + ",".join(map(str, xs)) + "]"


def _tslots(rows) -> str:
    return _l("/".join(map(str, r)) for r in rows)


def _inter(case: Case) -> str:
    return f"inter{case.inter_rows}x{case.inter_steps}+{case.inter_spare_steps}"


# --- validation ---------------------------------------------------------------------------------
_LEAST = {
    "H": 1,
    "HV": 1,
    "K": 1,
    "V": 1,
    "T": 0,
    "pool": 1,
    "seed": 0,
    "pool_gap": 0,
    "inter_rows": 0,
    "inter_steps": 0,
    "inter_spare_steps": 0,
    "warm_pool": 0,
}


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _int_tuple(x, optional: bool = False) -> bool:
    return (optional and x is None) or (isinstance(x, tuple) and all(map(_is_int, x)))


def _problem(c: Case) -> str | None:
    """What makes `c` impossible, as one line naming the field or coordinate token (None: nothing)."""
    if c.op not in OPS:
        return f"op {c.op!r}: expected one of {', '.join(OPS)}"
    for name, least in _LEAST.items():
        value = getattr(c, name)
        if not _is_int(value) or value < least:
            return f"{name}={value!r}: expected an integer >= {least}"
    if c.seed >= SEEDS:
        return f"seed{c.seed}: expected a seed below 2**32"
    for name, allowed in (
        ("state_dtype", DTYPES),
        ("input_dtype", DTYPES),
        ("index_dtype", INDEX_DTYPES),
        ("layout", LAYOUTS),
        ("decay", DECAYS),
        ("null", NULLS),
    ):
        if getattr(c, name) not in allowed:
            return f"{name}={getattr(c, name)!r}: expected one of {', '.join(map(str, allowed))}"
    for name in ("l2norm", "update", "output_given"):
        if not isinstance(getattr(c, name), bool):
            return f"{name}={getattr(c, name)!r}: expected True or False"
    if c.scale is not None and not (
        isinstance(c.scale, (int, float))
        and not isinstance(c.scale, bool)
        and math.isfinite(c.scale)
        and c.scale > 0
        and "-" not in str(c.scale)
    ):
        return f"scale={c.scale!r}: expected a finite number > 0 written without '-' (at least 1e-4)"
    named_lists = (
        ("read_slots", False),
        ("seqlens", False),
        ("write_slots", True),
        ("inter_index", True),
        ("accepted", True),
    )
    for name, optional in named_lists:
        if not _int_tuple(getattr(c, name), optional):
            return f"{name}={getattr(c, name)!r}: expected a tuple of integers"
    if not (c.token_slots is None or isinstance(c.token_slots, tuple) and all(map(_int_tuple, c.token_slots))):
        return f"token_slots={c.token_slots!r}: expected a tuple of tuples of integers, [B][T]"
    if not c.read_slots:
        return "slots[]: expected one read slot per request, B >= 1"
    if c.edge is not None and c.edge not in EDGES:
        return f"edge {c.edge!r}: expected one of {', '.join(EDGES)}"
    return _shape_problem(c) or _slot_problem(c) or _buffer_problem(c) or _accepted_problem(c)


def _shape_problem(c: Case) -> str | None:
    """T, seqlens and the per-request lists against the op and B."""
    if c.op == "decode" and c.T != 1:
        return f"decode with T{c.T}: a decode step has one token per request (T1); several tokens are a verify"
    if c.op == "verify" and c.T < 1:
        return "verify with T0: expected T >= 1 tokens per request"
    if c.op == "prefill":
        if len(c.seqlens) != c.B:
            return f"seqlens{_l(c.seqlens)}: a prefill has one sequence length per request, B{c.B} here"
        if min(c.seqlens) < 0:
            return f"seqlens{_l(c.seqlens)}: a sequence length is >= 0"
        if c.T != max(c.seqlens):
            return f"prefill with T{c.T}: T is the longest sequence, max(seqlens{_l(c.seqlens)}) = {max(c.seqlens)}"
        if c.token_slots is not None or c.inter_rows or not c.update:
            return "prefill: no tslots, inter buffer or noupdate (a prefill writes its final states back)"
    elif c.seqlens:
        return f"seqlens{_l(c.seqlens)}: only a prefill has sequence lengths ({c.op} has T{c.T} per request)"
    if c.write_slots is not None and len(c.write_slots) != c.B:
        return f"wslots{_l(c.write_slots)}: expected one write slot per request, B{c.B} here"
    if c.token_slots is not None:
        if len(c.token_slots) != c.B or any(len(row) != c.T for row in c.token_slots):
            return f"tslots{_tslots(c.token_slots)}: expected B{c.B} rows of T{c.T} slots, one per token"
        if not c.update:
            return "tslots with noupdate: a per-token scatter writes the pool"
    return None


def _slot_problem(c: Case) -> str | None:
    """Every slot a request names is padding or inside the pool."""
    named = (
        (f"slots{_l(c.read_slots)}", c.read_slots),
        (f"wslots{_l(c.write_slots or ())}", c.write_slots or ()),
        (f"tslots{_tslots(c.token_slots or ())}", [s for row in c.token_slots or () for s in row]),
    )
    for token, slots in named:
        if outside := [s for s in slots if s >= c.pool]:
            padding = "< 0" if c.null < 0 else "<= 0 (null0)"
            return f"{token}: slot {outside[0]} is outside pool{c.pool} (slots 0..{c.pool - 1}; padding is {padding})"
    return None


def _buffer_problem(c: Case) -> str | None:
    """The intermediate-state buffer: rows for every request, steps for every token."""
    if not c.inter_rows:
        if c.inter_index is not None:
            return f"rows{_l(c.inter_index)}: intermediate rows, but no intermediate buffer (interRxS+P)"
        if c.inter_steps or c.inter_spare_steps:
            return f"{_inter(c)}: steps without rows (inter_rows=0 is no buffer)"
        return None
    if c.inter_steps < c.T:
        return f"{_inter(c)}: {c.inter_steps} steps for T{c.T} tokens (expected steps >= T)"
    if c.inter_index is None:
        if c.inter_rows < c.B:
            if c.edge == "pad-past-scratch" and all(c.padded[c.inter_rows - 1 :]):
                return None  # padded from the extra (last) row on: they write nothing outside the scratch (EDGES)
            return f"{_inter(c)}: {c.inter_rows} rows for B{c.B} requests (each writes its batch row; see rows[...])"
        return None
    if len(c.inter_index) != c.B:
        return f"rows{_l(c.inter_index)}: expected one intermediate row per request, B{c.B} here"
    if outside := [r for r in c.inter_index if r >= c.inter_rows]:
        return f"rows{_l(c.inter_index)}: row {outside[0]} is outside the {c.inter_rows} rows of {_inter(c)}"
    return None


def _accepted_problem(c: Case) -> str | None:
    """Accepted counts: one per request, with per-token slots; an in-range count of a live row selects its read slot
    (token_slots[n][accepted[n] - 1]); an out-of-range one (0, or T+1..2T: an edge) leaves the row without a starting
    state, so it names the null slot (the row is skipped)."""
    if c.accepted is None:
        return None
    token = f"acc{_l(c.accepted)}"
    if c.token_slots is None:
        return f"{token}: accepted counts select a per-token slot (tslots[...]), and this case has none"
    if len(c.accepted) != c.B:
        return f"{token}: expected one accepted count per request, B{c.B} here"
    for n, (acc, read, row) in enumerate(zip(c.accepted, c.read_slots, c.token_slots)):
        if not 0 <= acc <= 2 * c.T:
            return f"{token}: request {n}'s count {acc} is outside 0..2T ({2 * c.T}; 1..T{c.T} are in range)"
        if 1 <= acc <= c.T and not c.padded[n] and read != row[acc - 1]:
            return f"{token}: request {n} reads slot {row[acc - 1]} (tslots column {acc - 1}), not slots[{n}] = {read}"
        if not 1 <= acc <= c.T and not c.padded[n]:
            return f"{token}: request {n}'s count {acc} names no starting state: its read slot is the null {c.null}"
    return None


# --- parsing ------------------------------------------------------------------------------------
_INT_FIELDS = {
    "T": "T",
    "H": "H",
    "HV": "HV",
    "K": "K",
    "V": "V",
    "pool": "pool",
    "seed": "seed",
    "gap": "pool_gap",
    "null": "null",
    "warm": "warm_pool",
    "B": "B",
    "pad": "pad",
}  # B, pad: derived, checked by parse
_LISTS = {
    "slots": "read_slots",
    "wslots": "write_slots",
    "seqlens": "seqlens",
    "rows": "inter_index",
    "acc": "accepted",
}
_REQUIRED = {
    "H": "H",
    "HV": "HV",
    "K": "K",
    "V": "V",
    "T": "T",
    "pool": "pool",
    "seed": "seed",
    "read_slots": "slots[...]",
}
_INT_LIST = r"-?\d+(?:,-?\d+)*"


def _parse_token(tok: str) -> dict:
    if m := re.fullmatch(r"(T|HV|H|K|V|pool|seed|gap|null|warm|B|pad)(\d+)", tok):
        return {_INT_FIELDS[m[1]]: int(m[2])}
    if m := re.fullmatch(rf"(slots|wslots|seqlens|rows|acc)\[((?:{_INT_LIST})?)\]", tok):
        return {_LISTS[m[1]]: tuple(int(x) for x in m[2].split(",") if x)}
    if m := re.fullmatch(r"tslots\[((?:-?\d+(?:/-?\d+)*)(?:,-?\d+(?:/-?\d+)*)*)?\]", tok):
        return {"token_slots": tuple(tuple(map(int, r.split("/"))) for r in (m[1] or "").split(",") if r)}
    if m := re.fullmatch(r"inter(\d+)x(\d+)\+(\d+)", tok):
        return {"inter_rows": int(m[1]), "inter_steps": int(m[2]), "inter_spare_steps": int(m[3])}
    if m := re.fullmatch(r"(fp32|bf16|fp16)(state|in)", tok):
        return {"state_dtype" if m[2] == "state" else "input_dtype": m[1]}
    if tok in INDEX_DTYPES:
        return {"index_dtype": tok}
    if tok in LAYOUTS:
        return {"layout": tok}
    if tok.startswith(("decay_", "gate_")):  # gate_<regime>: coordinates written before 2026-12-06
        return {"decay": tok.partition("_")[2]}
    if tok.startswith("edge_"):
        return {"edge": tok[5:].replace("_", "-")}
    if m := re.fullmatch(r"scale(\d+(?:\.\d*)?(?:e\+?\d+)?)", tok):
        return {"scale": float(m[1])}
    if tok == "nol2":
        return {"l2norm": False}
    if tok == "noout":
        return {"output_given": False}
    if tok == "noupdate":
        return {"update": False}
    raise CaseError(f"Case coordinate: unknown token {tok!r}")


def _tuples(v):
    if isinstance(v, list):
        return tuple(_tuples(x) for x in v)
    return v
