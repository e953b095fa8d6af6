"""Case -> tensors. All values come from torch.Generator(case.seed); writable buffers are guarded.

Every buffer a target may write (pool, intermediate states, output) lives inside a larger allocation
whose surplus is filled with a NaN GUARD pattern, and the part the target should fill is pre-set to a
different NaN POISON pattern. After the call: guard bits changed -> out-of-bounds write; poison left
where the contract says "written" -> unwritten output; anything else changed that the contract says
is untouched -> corruption.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from fuzz.case import Case
from fuzz.targets.semantics import TORCH_DTYPES

GUARD_SLOTS = 2  # pool slots on each side: index -1 and -2 land here
_BITS = {torch.float32: (torch.int32, 0x7FC0DEAD, 0x7FBAD0BA), torch.bfloat16: (torch.int16, 0x7FDE, 0x7FBA),
         torch.float16: (torch.int16, 0x7FDE, 0x7FBA)}
INDEX_DTYPES = {"i32": torch.int32, "i64": torch.int64}


def fill_pattern(t: torch.Tensor, which: str) -> torch.Tensor:
    int_dtype, guard, poison = _BITS[t.dtype]
    t.view(int_dtype).fill_(guard if which == "guard" else poison)
    return t


def has_pattern(t: torch.Tensor, which: str) -> torch.Tensor:
    """Elementwise: does t still hold the guard / poison bit pattern?"""
    int_dtype, guard, poison = _BITS[t.dtype]
    return t.contiguous().view(int_dtype) == (guard if which == "guard" else poison)


@dataclass
class Guarded:
    """`view` is what the target sees: rows lead.. of `full`, the first dim-1 entries of each row.
    `before` is a copy of `full` taken when the inputs were set."""

    full: torch.Tensor
    view: torch.Tensor
    lead: int
    before: torch.Tensor

    @classmethod
    def around(cls, shape: tuple, dtype, device, lead: int, spare_dim1: int = 0) -> Guarded:
        """Allocate [lead + shape[0] + lead, shape[1] + spare_dim1, *shape[2:]] and view the inner block."""
        full = fill_pattern(torch.empty((shape[0] + 2 * lead, shape[1] + spare_dim1, *shape[2:]), dtype=dtype,
                                        device=device), "guard")
        view = full[lead:lead + shape[0], : shape[1]]
        fill_pattern(view, "poison")
        return cls(full, view, lead, full.clone())

    @property
    def index(self) -> tuple[slice, slice]:
        return slice(self.lead, self.lead + self.view.shape[0]), slice(0, self.view.shape[1])

    @property
    def mask(self) -> torch.Tensor:
        m = torch.zeros(self.full.shape, dtype=torch.bool, device=self.full.device)
        m[self.index] = True
        return m

    @property
    def before_view(self) -> torch.Tensor:
        return self.before[self.index]

    def snapshot(self) -> None:
        self.before = self.full.clone()


@dataclass
class Tensors:
    """Inputs (q, k, v in the case's layout of tokens) and guarded writable buffers."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    A_log: torch.Tensor
    dt_bias: torch.Tensor
    a: torch.Tensor
    b: torch.Tensor
    g: torch.Tensor  # log-decay computed from the raw gates in fp32 (for "log" gate targets)
    beta: torch.Tensor
    read_slots: torch.Tensor
    write_slots: torch.Tensor | None
    token_slots: torch.Tensor | None
    inter_index: torch.Tensor | None
    cu_seqlens: torch.Tensor | None
    pool: Guarded
    inter: Guarded | None
    output: Guarded


# Gate regimes: (A_log range, a + dt_bias centre and spread, b spread). Together they cover exp(g) ~ 1
# (no decay) through ~0.5 to 0 (full forgetting), the softplus threshold at 20, and saturation where a
# careless kernel produces inf - inf or 0 * inf.
GATE_REGIMES = {
    "mild": ((-1.0, 0.5), (0.0, 1.0), 1.0),
    "nodecay": ((-14.0, -10.0), (-2.0, 1.0), 4.0),
    "forget": ((1.0, 2.5), (6.0, 2.0), 1.0),
    "threshold": ((-4.0, -2.0), (20.0, 1.5), 2.0),
    "saturated": ((0.0, 3.0), (40.0, 60.0), 40.0),
    "negsat": ((-1.0, 1.0), (-60.0, 30.0), 40.0),
}


def named_slots(case: Case) -> list[int]:
    """Pool slots a request names (read, written, per token), and slot 0, where padding may be redirected."""
    named = [*case.read_slots, *(case.write_slots or ()), *(s for row in case.token_slots or () for s in row)]
    return sorted(s for s in {0, *named} if 0 <= s < case.pool)


def materialize(case: Case, device: str | torch.device, state_dtype=None) -> Tensors:
    gen = torch.Generator().manual_seed(case.seed)
    f32 = dict(dtype=torch.float32)
    in_dtype = TORCH_DTYPES[case.input_dtype]
    st_dtype = state_dtype or TORCH_DTYPES[case.state_dtype]
    tokens = (sum(case.seqlens),) if case.op == "prefill" else (case.B, case.T)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, **f32)

    def uniform(lo, hi, *shape):
        return lo + (hi - lo) * torch.rand(*shape, generator=gen, **f32)

    # Per-token magnitudes 10^[-3, 1] reach near-zero q/k (eps-dominated l2norm) and large v.
    mag = lambda n: 10 ** uniform(-3.0, 1.0, *tokens, 1, 1)  # noqa: E731
    q = randn(*tokens, case.H, case.K) * mag(0)
    k = randn(*tokens, case.H, case.K) * mag(0)
    v = randn(*tokens, case.HV, case.V) * mag(0)
    regime = case.gate
    names = list(GATE_REGIMES)
    if regime == "mixed":  # a regime per value head
        picks = torch.randint(len(names), (case.HV,), generator=gen).tolist()
        params = [GATE_REGIMES[names[i]] for i in picks]
    else:
        params = [GATE_REGIMES[regime]] * case.HV
    A_log = torch.stack([uniform(*p[0], 1)[0] for p in params])
    dt_bias = randn(case.HV) * 0.5
    centre = torch.tensor([p[1][0] for p in params])
    spread = torch.tensor([p[1][1] for p in params])
    a = centre + spread * randn(*tokens, case.HV) - dt_bias
    b = torch.tensor([p[2] for p in params]) * randn(*tokens, case.HV)
    q, k, v, a, b = (x.to(in_dtype) for x in (q, k, v, a, b))
    # Precomputed gates for "log" targets, as an fp32 gating kernel would produce them.
    x = a.float() + dt_bias
    g = -torch.exp(A_log) * torch.where(x > 20, x, torch.log1p(torch.exp(x)))
    beta = torch.sigmoid(b.float())

    idx = INDEX_DTYPES[case.index_dtype]
    as_index = lambda xs: None if xs is None else torch.tensor(xs, dtype=idx, device=device)  # noqa: E731
    state_shape = (case.V, case.K) if case.layout == "vk" else (case.K, case.V)
    pool = Guarded.around((case.pool, case.HV, *state_shape), st_dtype, device, GUARD_SLOTS, case.pool_gap)
    # Slots no request names (up to 8 GiB of them) get filler drawn on the device, cheaply; the named ones, whose
    # values the math depends on, come from the case's generator, the same on every device.
    named = named_slots(case)
    pool.view.normal_(0.0, 0.5, generator=torch.Generator(pool.view.device).manual_seed(case.seed))
    pool.view[named] = (randn(len(named), case.HV, *state_shape) * 0.5).to(st_dtype).to(device)
    pool.snapshot()
    inter = None
    if case.inter_rows:
        inter = Guarded.around((case.inter_rows, case.inter_steps, case.HV, *state_shape), st_dtype, device, 1,
                               case.inter_spare_steps)
    out_shape = (*tokens, case.HV, case.V)
    output = Guarded.around(out_shape, TORCH_DTYPES[case.input_dtype], device, 1)
    cu = None
    if case.op == "prefill":
        cu = torch.tensor([0, *torch.tensor(case.seqlens).cumsum(0).tolist()], dtype=idx, device=device)
    dev = lambda t: t.to(device)  # noqa: E731
    return Tensors(
        q=dev(q), k=dev(k), v=dev(v), A_log=dev(A_log), dt_bias=dev(dt_bias), a=dev(a), b=dev(b), g=dev(g),
        beta=dev(beta), read_slots=as_index(case.read_slots), write_slots=as_index(case.write_slots),
        token_slots=as_index(case.token_slots), inter_index=as_index(case.inter_index), cu_seqlens=cu,
        pool=pool, inter=inter, output=output,
    )
