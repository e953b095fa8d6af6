"""A failure's identity, as one value: its kind, the dispatch bucket it broke in (target, operation, kernel variant)
and its cause signature (no numbers: fuzz.judge.failures.normalized). Two failures with equal keys are one failure:
the session reports one minimal case per key, the live log and the run report write it, the gate tells a baseline's
failure from a candidate's by (test, key), and the campaign triages by its cause.

A failure on a contract edge (Case.edge, fuzz.model.engines.EDGES) carries the edge in its key: Hypothesis shrinks it
apart from plain bugs (a shrink that sheds the edge and still fails is another key: a plain bug), the rounds report
it apart, and the run summary, the campaign and the gate count it apart."""

from __future__ import annotations

from dataclasses import dataclass

SEPARATOR = " | "
EDGE = "edge "  # the last part of an edge's key text


@dataclass(frozen=True, order=True)
class FailureKey:
    kind: str  # the failure class's name (fuzz.judge.failures.KINDS), or a failed test's error class
    target: str
    op: str  # '' where none is known (a failed test that is no fuzz check)
    variant: str  # the kernel variant the target picks for the case ('' where it has one kernel)
    cause: str
    edge: str = ""  # the contract edge its case probes ('' for none: a plain failure)

    @classmethod
    def of(cls, kind: str, bucket: str, cause: str, edge: str = "") -> FailureKey:
        """From a failure's dispatch bucket, TARGET:OP or TARGET:OP:VARIANT (fuzz.run.harness.failure_bucket): the
        one place that reads a bucket's text."""
        target, _, rest = bucket.partition(":")
        op, _, variant = rest.partition(":")
        return cls(kind, target, op, variant, cause, edge)

    @property
    def bucket(self) -> str:
        """The dispatch part, as fuzz.run.harness.failure_bucket spells it."""
        return ":".join(p for p in (self.target, self.op, self.variant) if p)

    def to_json(self) -> str:
        """The key's text, as the run report, the live log and Hypothesis's keyed failure classes hold it:
        'KIND | BUCKET | CAUSE', and ' | edge EDGE' after it for an edge's."""
        return SEPARATOR.join((self.kind, self.bucket, self.cause, *([f"{EDGE}{self.edge}"] if self.edge else [])))

    @classmethod
    def from_json(cls, text: str) -> FailureKey:
        kind, bucket, cause = text.split(SEPARATOR, 2)
        before, _, last = cause.rpartition(SEPARATOR)
        edge = last.removeprefix(EDGE) if before and last.startswith(EDGE) else ""
        return cls.of(kind, bucket, before if edge else cause, edge)

    def __str__(self) -> str:
        return self.to_json()
