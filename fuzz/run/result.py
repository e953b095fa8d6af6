"""The result of one differential check, as one typed value: what ran, what was compared, what broke, and where the
time went. `fuzz.run.harness.check` returns it, an isolated worker ships it back as it is (it pickles), and the
session, the report, the corpus writer and the gate read it; nothing travels through module globals or messages."""
from __future__ import annotations

from dataclasses import dataclass, field

from fuzz.case import Case
from fuzz.judge.failures import KINDS, GdnFailure, keyed
from fuzz.judge.verdict import Comparison


@dataclass(frozen=True)
class Failure:
    """A failed check: its kind (a failure class name), the case, what broke (`detail`, with numbers) and the cause
    signature (without them). `notes` hold what helps triage: the library's traceback, a worker's stderr, a
    sanitizer report."""

    kind: str
    case: Case
    detail: str
    cause: str
    bucket: str  # fuzz.run.harness.failure_bucket: target, operation, kernel variant
    notes: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The failure's identity: kind x dispatch bucket x cause."""
        return f"{self.kind} | {self.bucket} | {self.cause}"

    @property
    def message(self) -> str:
        return f"{self.case!r}: {self.detail}"

    def exception(self) -> GdnFailure:
        """The typed exception to raise (its class is keyed, so Hypothesis shrinks each key on its own)."""
        error = keyed(KINDS[self.kind], self.key)(self.case, self.detail, self.cause)
        for note in self.notes:
            error.add_note(note)
        error.failure = self
        return error

    @classmethod
    def from_exception(cls, error: GdnFailure, bucket: str, notes: tuple[str, ...] = ()) -> Failure:
        kind = next(k for k in type(error).__mro__ if k.__name__ in KINDS).__name__
        return cls(kind, error.case, error.detail, error.cause, bucket, notes)

    def with_notes(self, *notes: str) -> Failure:
        return Failure(self.kind, self.case, self.detail, self.cause, self.bucket, self.notes + notes)


@dataclass(frozen=True)
class CheckResult:
    target: str
    case: Case
    bucket: str
    failure: Failure | None = None
    comparisons: tuple[Comparison, ...] = ()
    phases: dict = field(default_factory=dict)  # seconds per phase: tensors, oracle, kernel, verdict
    events: tuple[str, ...] = ()  # coverage labels for --hypothesis-show-statistics

    @property
    def outcome(self) -> str:
        return "pass" if self.failure is None else self.failure.kind

    @property
    def worst_ratio(self) -> float:
        """The largest error-to-bound ratio judged (0 when nothing was compared)."""
        return max((c.ratio for c in self.comparisons), default=0.0)

    def raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure.exception()


def failures_in(error: BaseException) -> list[Failure]:
    """The Failure records inside an exception: a raised failure, or a (nested) exception group of them, as
    Hypothesis reports several distinct failures. Other exceptions are not findings."""
    if isinstance(error, BaseExceptionGroup):
        return [f for e in error.exceptions for f in failures_in(e)]
    failure = getattr(error, "failure", None)
    return [failure] if isinstance(failure, Failure) else []
