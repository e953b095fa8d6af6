"""The result of one differential check, as one typed value: what ran, what was compared, what broke, and where the
time went. `fuzz.run.harness.check` returns it, an isolated worker ships it back as it is (it pickles), and the
session, the report, the corpus writer and the gate read it; nothing travels through module globals or messages.

A failure's way out, one conversion at each end:
  1. a stage raises a GdnFailure (fuzz.judge: the verdict, or a driver's own check);
  2. the stage runner (fuzz.run.harness.Check.judging) makes it the CheckResult's Failure value
     (`Failure.from_exception`); an isolated worker builds its KernelCrash / KernelHang as the value directly;
  3. a test that fails Hypothesis raises `Failure.exception()`: a keyed GdnFailure whose `.failure` is that same value;
  4. the run takes the values back out of what Hypothesis raised (`failures_in`), never rebuilding them."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from fuzz.judge.failures import KINDS, GdnFailure, keyed
from fuzz.judge.verdict import Comparison
from fuzz.model.case import Case
from fuzz.run.failure_key import FailureKey


def in_phase(phase: str | None) -> str:
    """A check's phase in words, for a crash's detail and cause: "in the kernel call", "in the tensors phase"."""
    if phase is None:
        return "before its first phase"
    return f"in the {phase}" if phase.endswith(("call", "probe")) else f"in the {phase} phase"


@dataclass(frozen=True)
class CrashAttribution:
    """Which call a KernelCrash happened in, and whether it needs the check before it. Kernels launch asynchronously:
    an illegal address may surface at a later CUDA call (the next case's tensors), so the crashing worker's phase
    alone can blame the wrong case. `fuzz.run.worker.attributed` re-runs the case with CUDA_LAUNCH_BLOCKING=1, where
    the error raises in the launching call: alone in a fresh worker, then after the case checked before it."""

    phase: str | None  # where the crashing worker was (fuzz.run.worker.STAGES; None: before the first phase)
    previous: Case | None = None  # the case the same worker process checked just before (None: its first check)
    previous_target: str | None = None  # the previous case's target, when not the crashing case's own
    alone: bool | None = None  # crashed again alone in a fresh blocking worker (None: not tried)
    alone_phase: str | None = None
    after_previous: bool | None = None  # the previous case, then this one, in a fresh blocking worker crashed
    after_previous_phase: str | None = None
    previous_crashed: bool = False  # that crash came in the previous case's own check

    @property
    def summary(self) -> str:
        """One line in words: the call that crashed, and whether the case crashes alone or only after another."""
        if self.alone is None:
            return f"crashed {in_phase(self.phase)}"
        if self.alone:
            moved = "" if self.alone_phase == self.phase else f" (surfaced {in_phase(self.phase)} without it)"
            return f"crashed {in_phase(self.alone_phase)}; reproduces alone with CUDA_LAUNCH_BLOCKING=1{moved}"
        first = f"crashed {in_phase(self.phase)}; does not crash alone with CUDA_LAUNCH_BLOCKING=1"
        if self.after_previous is None:
            return f"{first}; no case ran before it in its worker"
        before = f"{self.previous!r}" + (f" on {self.previous_target}" if self.previous_target else "")
        if not self.after_previous:
            return f"{first} nor after {before}: it needs a longer history, or the crash is nondeterministic"
        where = in_phase(self.after_previous_phase)
        if self.previous_crashed:
            return f"{first}; the previous case {before} crashes {where} when run first"
        return f"{first}; crashes {where} of the case after {before}"

    def to_json(self) -> dict:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**values, "previous": repr(self.previous) if self.previous else None, "summary": self.summary}

    @classmethod
    def from_json(cls, d: dict) -> CrashAttribution:
        values = {f.name: d[f.name] for f in fields(cls)}
        return cls(**{**values, "previous": Case.parse(d["previous"]) if d["previous"] else None})


@dataclass(frozen=True)
class Failure:
    """A failed check: its kind (a failure class name), the case, what broke (`detail`, with numbers) and the cause
    signature (without them). `notes` hold what helps triage: the library's traceback, a worker's stderr, a
    sanitizer report. `attribution`: a KernelCrash's, from an isolated worker (which call crashed). `before`: the
    earlier calls of a serving sequence, in order (the failing call is `case`), which triage reads with it."""

    kind: str
    case: Case
    detail: str
    cause: str
    bucket: str  # fuzz.run.harness.failure_bucket: target, operation, kernel variant
    notes: tuple[str, ...] = ()
    attribution: CrashAttribution | None = None
    before: tuple[Case, ...] = ()

    @property
    def key(self) -> FailureKey:
        """The failure's identity: kind x dispatch bucket x cause (x the contract edge its case probes)."""
        return FailureKey.of(self.kind, self.bucket, self.cause, self.case.edge or "")

    @property
    def message(self) -> str:
        return f"{self.case!r}: {self.detail}"

    def exception(self) -> GdnFailure:
        """The typed exception to raise (its class is keyed, so Hypothesis shrinks each key on its own); it carries
        this value as `.failure`, which `failures_in` reads back."""
        error = keyed(KINDS[self.kind], self.key.to_json())(self.case, self.detail, self.cause)
        for note in self.notes:
            error.add_note(note)
        error.failure = self
        return error

    @classmethod
    def from_exception(
        cls, error: GdnFailure, bucket: str, notes: tuple[str, ...] = (), attribution: CrashAttribution | None = None
    ) -> Failure:
        """The value of a raised failure: the stage runner's conversion (fuzz.run.harness.Check.judging)."""
        kind = next(k for k in type(error).__mro__ if k.__name__ in KINDS).__name__
        return cls(kind, error.case, error.detail, error.cause, bucket, notes, attribution)

    def with_notes(self, *notes: str) -> Failure:
        return replace(self, notes=self.notes + notes)


@dataclass(frozen=True)
class CheckResult:
    target: str
    case: Case
    bucket: str
    failure: Failure | None = None
    comparisons: tuple[Comparison, ...] = ()
    phases: dict = field(default_factory=dict)  # seconds per phase: tensors, oracle, kernel, verdict
    events: tuple[str, ...] = ()  # coverage labels for --hypothesis-show-statistics
    unjudged: str | None = None  # why the case could not be judged here (the device ran out of memory): no verdict
    # the library says it does not support this device (fuzz.targets.unsupported): the target is unavailable, why
    unavailable: str | None = None

    @property
    def outcome(self) -> str:
        if self.unavailable:
            return "unavailable"
        return "unjudged" if self.unjudged else "pass" if self.failure is None else self.failure.kind

    @property
    def worst_ratio(self) -> float:
        """The largest error-to-bound ratio judged (0 when nothing was compared)."""
        return max((c.ratio for c in self.comparisons), default=0.0)

    def raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure.exception()


def failures_in(error: BaseException) -> list[Failure]:
    """The Failure values inside an exception: those `Failure.exception()` raised carry, alone or in a (nested)
    exception group, as Hypothesis reports several distinct failures. Other exceptions are not findings."""
    if isinstance(error, BaseExceptionGroup):
        return [f for e in error.exceptions for f in failures_in(e)]
    failure = getattr(error, "failure", None)
    return [failure] if isinstance(failure, Failure) else []
