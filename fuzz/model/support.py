"""What a target accepts (`Support`: the adapter declares it, fuzz.targets.base.Target.declared narrows it by release
and known bugs), and what the strategies read of a target (`TargetView`). The strategies draw only inside it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Protocol

from fuzz.model.case import DECAYS


@dataclass(frozen=True)
class Support:
    """What a target accepts; strategies draw only inside it (plus deliberate invalid cases)."""

    ops: frozenset
    state_dtypes: tuple = ("fp32", "bf16")
    input_dtypes: tuple = ("bf16", "fp16", "fp32")
    index_dtypes: tuple = ("i32", "i64")
    layouts: tuple = ("vk",)
    head_dims: tuple | None = None  # allowed (K, V) pairs; None: the profile chooses
    heads: tuple | None = None  # allowed (H, HV) pairs; None: H in (1, 2), HV = H times one of gva_ratios
    gva_ratios: tuple = (1, 2, 4)
    invalid_gva: bool = True  # now and then HV = H + 1, which the target must reject
    single_head_min_B: int = 1  # the smallest batch drawn with H = 1
    one_token_min_B: int = 1  # the smallest batch drawn with T = 1
    max_T: int | None = None
    verify_min_T: int = 1  # smallest verify T (the API takes a buffer / disable_state_update only above it)
    pool: bool = True  # slot-addressed pool with padding; False: identity slots only
    padding: bool = True  # padded rows (the null slot) are drawn (a known bug masks them)
    split_write: bool = False
    intermediate: bool = False
    exact_rows: bool = False  # the intermediate buffer must have exactly B rows (FlashInfer bf16)
    spare_rows: bool = True  # buffers with more rows than B are drawn (where exact_rows allows; a known bug masks it)
    explicit_rows: bool = False  # accepts explicit intermediate row indices
    sliced_intermediate: bool = False
    spare_steps: bool = True  # the intermediate buffer may hold more steps than T (a cache sized for the longest T)
    buffer_with_update: bool = True  # the intermediate buffer is drawn in state-updating cases too
    token_slots: bool = False
    empty_prefill: bool = True  # accepts a prefill whose sequences are all empty (zero tokens in the call)
    strided_pool: bool = False
    no_update: bool = False
    l2norm_off: bool = True
    output_optional: bool = False  # output= may be None (the library allocates the buffer it returns)
    wide_offsets: bool = True  # slot offsets past 2^31 elements are drawn (the large-pool test; a known bug masks it)
    decay_regimes: tuple = DECAYS  # fuzz.model.case decay regimes drawn
    arch: tuple = ()  # CUDA compute-capability majors required ((): any device, CPU included)
    scales: tuple | None = None  # the budget's attention scales drawn (None: all; (None,): the kernel's default only)
    # the serving engine whose glue the target calls (fuzz.model.engines.ENGINES): cases are drawn under its index
    # rules, with its contract edges now and then; None: a kernel target, drawn over everything it accepts
    engine: str | None = None

    def least_B(self, H: int, T: int) -> int:
        """The smallest batch drawn for H qk heads and T tokens (single_head_min_B, one_token_min_B)."""
        return max(self.single_head_min_B if H == 1 else 1, self.one_token_min_B if T == 1 else 1)

    def admits(self, case) -> bool:
        """Could the strategies draw `case` inside this support (an illegal head ratio, a deliberate invalid case,
        aside)? The case-level reducer keeps to it (fuzz.suite.session): a step outside what the target accepts would
        find the target's refusal, not the failure being shrunk."""
        buffer = bool(case.inter_rows)
        heads = (
            (case.H, case.HV) in self.heads
            if self.heads
            else case.HV % case.H != 0 or case.HV // case.H in self.gva_ratios
        )
        return heads and all(
            (
                case.op in self.ops,
                case.state_dtype in self.state_dtypes,
                case.input_dtype in self.input_dtypes,
                case.index_dtype in self.index_dtypes,
                case.layout in self.layouts,
                self.head_dims is None or (case.K, case.V) in self.head_dims,
                case.decay in self.decay_regimes,
                self.max_T is None or case.T <= self.max_T,
                case.op != "verify" or case.T >= self.verify_min_T,
                case.B >= self.least_B(case.H, case.T),
                self.pool or (case.pool == case.B and case.read_slots == tuple(range(case.B))),
                self.padding or not any(case.padded),
                self.split_write or case.write_slots is None,
                self.token_slots or case.token_slots is None,
                self.intermediate or not buffer,
                not buffer or case.inter_rows == case.B or (self.spare_rows and not self.exact_rows),
                self.explicit_rows or case.inter_index is None,
                self.sliced_intermediate or not case.inter_spare_steps,
                self.spare_steps or case.inter_steps == (case.T if buffer else 0),
                self.buffer_with_update or not (buffer and case.update),
                self.strided_pool or not case.pool_gap,
                self.no_update or case.update,
                self.l2norm_off or case.l2norm,
                self.output_optional or case.output_given,
                self.empty_prefill or case.op != "prefill" or any(case.seqlens),
            )
        )

    def narrowed(self, **limits) -> Support:
        """This support with fewer choices: tuples keep the values they share with the limit, flags can only turn
        off, minimums only rise."""

        def narrow(name, have, limit):
            if isinstance(have, (tuple, frozenset)):
                return type(have)(x for x in have if x in limit)
            if isinstance(have, bool):
                return have and limit
            if name.startswith("max_"):  # a maximum (None: unbounded) only falls
                return limit if have is None else min(have, limit)
            return max(have, limit)

        return dataclasses.replace(
            self, **{name: narrow(name, getattr(self, name), limit) for name, limit in limits.items()}
        )


class TargetView(Protocol):
    """A target as the strategies see it (fuzz.targets.base.Target): its name and semantics path, the release its API
    reports, its own Support and what it declares (narrowed by its release and the masks of the known bugs given),
    its semantics row (the padding contract), the width its element offsets may wrap at and the operations it cannot
    run on a device (serving_ops). A target pinned to one pool's geometry (fuzz.generate.serving.Pinned) offers what
    `cases` reads: all but `support` and op_unavailable."""

    name: str
    support: Support

    @property
    def path(self) -> str: ...

    def release(self) -> str | None: ...

    def declared(self, bugs: tuple = ()) -> Support: ...

    def semantics(self): ...

    def offset_bits(self) -> int: ...

    def op_unavailable(self, op: str, profile_device: str) -> str | None: ...
