"""Compiling a profile's bucket plan into the kernel cache ahead of a run: the engine of `gdn-fuzz warm`
(fuzz.cli.warm).

A GPU run spends its examples inside the compile buckets of a fixed plan (fuzz.generate.strategies.bucket_plan). A
bucket is still several compiled kernels: the library picks a tile by B * HV (fuzz.model.dispatch and the kernels'
own tile tables), so one bucket compiles once per batch band. `warm` runs, for every available target, operation and
planned bucket, one case per batch on a ladder that crosses those bands (plan_batches), in `--jobs` isolated worker
processes at once (each compiles in a FlashInfer workspace of its own and publishes to the shared one:
fuzz.run.kernel_cache). Verdicts are not its business: a case that fails here is the fuzz run's to find and shrink.

It writes what it warmed (per target and operation, the release and a digest of the plan) to `gdn-warm.json` in each
cache directory; a run reads it back (`status`) and says in its targets table whether every bucket it drew from was
warmed ahead, or which were not.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from fuzz.generate.profiles import Budget
from fuzz.generate.strategies import MAX_STRADDLE_B, Bucket, bucket_plan
from fuzz.generate.threshold_plan import simplest_case, threshold_cases
from fuzz.model import dispatch
from fuzz.model.case import Case

MANIFEST = "gdn-warm.json"
# B * HV bands where kernels pick another tile without changing kernel (FlashInfer 0.7.4 gdn_decode_mtp.py
# get_mtp_config: 64 / 128 / 448 / 1024 work units; gdn_decode_bf16_state.py: 128, 512, 1024, and the grid's waves
# over the SMs, plan_batches)
WORK_BANDS = (64, 128, 448, 512, 1024)
# The largest case warmed (fuzz.model.footprint.peak_bytes): past a thousand requests with a slot per token a case
# takes tens of GiB and is rare in a run (one that is drawn compiles then); below, the heavy verify cases of the
# dispatch straddles, which on the H200 took most of the verify tests' time when left cold (2026-12-03, call 2)
WARM_BYTES = 8 << 30


def plan_batches(target, bucket: Bucket, budget: Budget, sup) -> tuple[int, ...]:
    """Batch sizes that reach each tile band and dispatch side a bucket's cases can: powers of two up to the budget's
    largest B, B just short of and just past each band and each dispatch threshold (the strategies' straddle)."""
    H, HV, T = bucket.H, bucket.HV, max(bucket.T, 1)
    least = sup.least_B(H, bucket.T)
    found = {least, budget.max_B}
    found |= {2**i for i in range(budget.max_B.bit_length())}
    sms = dispatch.num_sms()
    bands = (*WORK_BANDS, 2 * sms, 4 * sms)  # bf16 MTP: tile_v by waves of the grid over the SMs
    found |= {b for w in bands for b in (w // HV, w // HV + 1) if b <= budget.max_B}
    for t in dispatch.thresholds(target.path, target.release()):
        if t.applies(T, bucket.buffer, bucket.update):
            found |= {b for above in (False, True) if 1 <= (b := t.batch(above, H, HV, sms)) <= MAX_STRADDLE_B}
    return tuple(sorted(b for b in found if b >= least))


@dataclass(frozen=True)
class Unit:
    """One planned bucket of one target and operation, with its cases (one per batch of its ladder); or (bucket None)
    the threshold plan's cases of a target and operation that no bucket's ladder holds."""

    target: str
    op: str
    bucket: Bucket | None
    cases: tuple[Case, ...]


def plan_digest(target, op: str, budget: Budget, masks: str) -> str:
    """What identifies a warmed plan: the target's release, the planned buckets and the threshold plan."""
    from fuzz.model.known_bugs import known_bugs

    bugs = known_bugs(target.path, target.release(), masks)
    planned = bucket_plan(target.name, op, target.declared(bugs), budget)
    text = repr((target.release(), planned, threshold_cases(target, op, budget, bugs)))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def units_for(targets, budget: Budget, masks: str) -> tuple[list[Unit], dict[str, str]]:
    """Every planned bucket of the available targets (their known-bug masks applied by `masks`), and the cases of
    their threshold plans the buckets' ladders leave out; and the targets left out, with why."""
    from fuzz.model.case import CaseError
    from fuzz.model.footprint import peak_bytes
    from fuzz.model.known_bugs import known_bugs, masked_reason

    units, skipped = [], {}
    for target in targets:
        if reason := target.unavailable_reason(budget.device):
            skipped[target.name] = reason
            continue
        bugs = known_bugs(target.path, target.release(), masks)
        sup = target.declared(bugs)
        for op in sorted(target.support.ops):
            if masked_reason(bugs, op):
                continue
            for bucket in bucket_plan(target.name, op, sup, budget):
                made = []
                for B in plan_batches(target, bucket, budget, sup):
                    try:
                        case = simplest_case(target, op, bucket, B, budget, sup)
                    except CaseError:
                        continue  # a batch this bucket's geometry cannot hold
                    if peak_bytes(case, target.offset_bits()) <= WARM_BYTES:  # a larger one compiles when drawn
                        made.append(case)
                units.append(Unit(target.name, op, bucket, tuple(made)))
            laddered = {repr(c) for u in units if (u.target, u.op) == (target.name, op) for c in u.cases}
            rest = [c for c in threshold_cases(target, op, budget, bugs) if repr(c) not in laddered]
            if rest := [c for c in rest if peak_bytes(c, target.offset_bits()) <= WARM_BYTES]:
                units.append(Unit(target.name, op, None, tuple(rest)))
    return units, skipped


# ---- the manifest ---------------------------------------------------------------------------------------------
def read_manifest(directory: str | os.PathLike) -> dict:
    try:
        return json.loads((Path(directory) / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}


def write_manifest(directory: str | os.PathLike, entries: dict, meta: dict) -> None:
    """Add `entries` ("profile/masks/target/op" -> digest) to the directory's manifest, atomically."""
    path = Path(directory) / MANIFEST
    manifest = read_manifest(directory)
    manifest.setdefault("plans", {}).update(entries)
    manifest["last"] = meta
    staging = path.with_name(f"{MANIFEST}.tmp{os.getpid()}")
    staging.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    os.replace(staging, path)


def status(ran: dict, directories, profile: str, budget: Budget, masks: str) -> str:
    """One line for the targets table: whether every (target, op) this run drew from (`ran`: target -> ops) was warmed
    ahead for this plan, from the manifests in the cache `directories`."""
    from fuzz.targets.registry import TARGETS

    warmed, last = {}, {}
    for directory in directories:
        manifest = read_manifest(directory)
        warmed.update(manifest.get("plans", {}))
        last = manifest.get("last", last)
    by_name = {t.name: t for t in TARGETS}
    cold = [
        f"{name} {op}"
        for name, ops in sorted(ran.items())
        if name in by_name
        for op in sorted(ops)
        if op in by_name[name].support.ops
        and warmed.get(manifest_key(profile, masks, name, op)) != plan_digest(by_name[name], op, budget, masks)
    ]
    if not ran:
        return "warm-up: no fuzz test ran"
    if not cold:
        return (
            f"warm-up: every bucket this run drew from was compiled ahead (gdn-fuzz warm, {last.get('when', '?')},"
            f" {last.get('cases', '?')} cases in {last.get('seconds', '?')} s)"
        )
    return (
        f"warm-up: not compiled ahead for this plan: {', '.join(cold)} (gdn-fuzz warm --profile {profile} "
        f"--masks {masks} compiles them)"
    )


def manifest_key(profile: str, masks: str, target: str, op: str) -> str:
    return f"{profile}/{masks}/{target}/{op}"


# ---- running --------------------------------------------------------------------------------------------------
@dataclass
class Progress:
    """Cases done out of all, printed to stderr as a bar (a line per tenth where stderr is not a terminal)."""

    total: int
    done: int = 0
    failed: int = 0
    started: float = dataclasses.field(default_factory=time.monotonic)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    _shown: int = -1

    def step(self, failed: bool) -> None:
        with self._lock:
            self.done += 1
            self.failed += failed
            tenth = 10 * self.done // max(self.total, 1)
            if sys.stderr.isatty() or tenth != self._shown:
                self._shown = tenth
                bar = "#" * (30 * self.done // max(self.total, 1))
                end = "\r" if sys.stderr.isatty() and self.done < self.total else "\n"
                print(
                    f"warm [{bar:30s}] {self.done}/{self.total} cases, {time.monotonic() - self.started:.0f} s",
                    end=end,
                    file=sys.stderr,
                    flush=True,
                )


def run_units(units: list[Unit], device: str, jobs: int, timeout: float, done=None) -> Progress:
    """Check every unit's cases in `jobs` isolated workers at once, a unit's cases in one worker (a compile key is
    compiled once), the units taken in the order given; `done(unit)`, if given, is told each unit finished."""
    from fuzz.run.worker import Worker
    from fuzz.targets.registry import TARGETS, current_overrides

    by_name = {t.name: t for t in TARGETS}
    queue = list(units)
    progress = Progress(sum(len(u.cases) for u in units))
    lock, errors = threading.Lock(), []

    def serve() -> None:
        worker = Worker(current_overrides(), device, timeout)
        try:
            while True:
                with lock:
                    if not queue:
                        return
                    unit = queue.pop(0)
                for case in unit.cases:
                    progress.step(worker.check(by_name[unit.target], case).failure is not None)
                if done is not None:
                    with lock:
                        done(unit)
        except Exception as e:  # noqa: BLE001 - a worker that cannot start or a harness error ends this thread only
            errors.append(f"{type(e).__name__}: {e}")
        finally:
            worker.close()

    threads = [threading.Thread(target=serve, daemon=True) for _ in range(max(1, min(jobs, len(queue))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} warm-up worker(s) stopped: {errors[0]}")
    return progress


__all__ = [
    "MANIFEST",
    "Unit",
    "manifest_key",
    "plan_batches",
    "plan_digest",
    "run_units",
    "status",
    "units_for",
    "write_manifest",
]
