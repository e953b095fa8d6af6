"""Replay cases under `compute-sanitizer --tool memcheck` and attribute each report to its case.

A kernel's out-of-bounds access that lands inside another allocation corrupts nothing the verdict can see;
memcheck sees it, but only without PyTorch's caching allocator (PYTORCH_NO_CUDA_MEMORY_CACHING=1: every
tensor is its own allocation) and only once per process (the first error kills the CUDA context). So the
cases run in one child process under the sanitizer, each announced by a marker line; after an error the
child is restarted at the next case.

    gdn-fuzz sanitize flashinfer-bf16 'decode-B2-...' 'verify-B3-...'          # coordinates (fuzz.cli.sanitize)
    gdn-fuzz sanitize flashinfer-bf16 --sample 20 --op decode --profile h200    # drawn cases
    python -m fuzz.run.sanitize --child TARGET FILE DEVICE OVERRIDES            # the child it runs (internal)

`pytest --gdn-sanitize` runs this on each shrunk KernelCrash / GuardBreach and attaches the report.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from fuzz.model.case import Case

MARK, OUTCOME, DONE = "@@gdn-case", "@@gdn-outcome", "@@gdn-done"
ERROR_LINE = re.compile(r"^=+ (Invalid|Address|Program hit|Malloc|Out-of-range|Misaligned|Cuda API|Barrier)")


@dataclass
class SanitizerResult:
    case: str
    outcome: str  # the verdict in the sanitized run ("pass", a failure class, or "died")
    errors: int  # memcheck error reports attributed to this case
    report: str  # the sanitizer's lines for this case

    @property
    def clean(self) -> bool:
        return self.errors == 0 and self.outcome != "died"


SANITIZER = "compute-sanitizer"


def missing_sanitizer(executable: str = SANITIZER) -> str | None:
    """Why the sanitizer cannot run here (checked before a run's first test, not at its first crash's replay, which
    raised FileNotFoundError), or None."""
    if shutil.which(shlex.split(executable)[0]) is None:
        return f"needs {executable} (the CUDA toolkit's) on PATH"
    return None


def sanitizer_command(executable: str = SANITIZER) -> list[str]:
    """The sanitizer invocation (tests pass a stand-in executable)."""
    exe = shlex.split(executable)
    # --report-api-errors no: cuda-bindings probes driver symbols and would show up as API errors.
    return [*exe, "--tool", "memcheck", "--report-api-errors", "no", "--print-limit", "20"]


def sanitize(
    target: str,
    cases: list[Case],
    device: str = "cuda",
    overrides: dict | None = None,
    timeout: float = 900.0,
    executable: str = SANITIZER,
) -> list[SanitizerResult]:
    """Run cases under memcheck; one result per case, in order, for as many as finish within `timeout` seconds
    (a case cut off by the timeout is not reported: it neither passed nor failed)."""
    results: list[SanitizerResult] = []
    env = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1")
    deadline = time.monotonic() + timeout
    while len(results) < len(cases) and time.monotonic() < deadline:
        todo = cases[len(results) :]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump([repr(c) for c in todo], f)
        cmd = [
            *sanitizer_command(executable),
            sys.executable,
            "-m",
            "fuzz.run.sanitize",
            "--child",
            target,
            f.name,
            device,
            json.dumps(overrides or {}),
        ]
        text, timed_out = _run_group(cmd, env, deadline - time.monotonic())
        os.unlink(f.name)
        batch = _attribute(text, todo)
        if timed_out:
            results += [r for r in batch if r.outcome != "died"]  # the last case was cut off, not dead
            break
        if not batch:  # the child died before its first case: report that and stop
            raise RuntimeError(f"sanitizer child failed before any case:\n{text[-3000:]}")
        results += batch
    return results


def _run_group(cmd: list[str], env: dict, timeout: float) -> tuple[str, bool]:
    """(stdout + stderr, timed out). The sanitizer and its Python child share a new process group, so a timeout
    kills both (killing the sanitizer alone leaves the child holding the GPU)."""
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        return proc.communicate(timeout=max(timeout, 1.0))[0], False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.communicate()[0] + "\n(sanitizer run timed out)", True


SANITIZED = ("KernelCrash", "GuardBreach")  # failure kinds whose cause is a memory access


def sanitize_records(target, records, device: str) -> None:
    """Re-run each shrunk KernelCrash / GuardBreach under memcheck and attach the report to its failure."""
    from fuzz.targets.registry import current_overrides

    for record in records:
        if record.failure.kind in SANITIZED:
            r = sanitize(target.name, [record.failure.case], device, current_overrides())[0]
            record.failure = record.failure.with_notes(
                f"compute-sanitizer memcheck: {r.errors} errors; outcome under the sanitizer: {r.outcome}\n{r.report}"
            )


def _attribute(text: str, cases: list[Case]) -> list[SanitizerResult]:
    """Split the output at the case markers. A case whose outcome line is missing killed the child."""
    results, current, lines, outcome = [], None, [], None

    def close():
        errors = sum(bool(ERROR_LINE.match(ln)) for ln in lines)
        results.append(SanitizerResult(repr(cases[current]), outcome or "died", errors, "\n".join(lines)))

    for line in text.splitlines():
        if line.startswith(MARK):
            if current is not None:
                close()
            current, lines, outcome = int(line.split()[1]), [], None
        elif line.startswith(OUTCOME):
            outcome = line.split(None, 2)[2]
        elif line.startswith(DONE):
            break
        elif current is not None and line.startswith("="):
            lines.append(line)
    if current is not None:
        close()
    return results


def _child(target_name: str, path: str, device: str, overrides: str) -> None:
    from fuzz.run.harness import check
    from fuzz.targets.registry import TARGETS, overridden

    with overridden(json.loads(overrides)):
        target = next(t for t in TARGETS if t.name == target_name)
        for i, coordinate in enumerate(json.load(open(path))):
            print(f"{MARK} {i}", flush=True)
            try:
                failure = check(target, Case.parse(coordinate), device).failure
                outcome = "pass" if failure is None else f"{failure.kind}: {failure.detail.splitlines()[0][:300]}"
            except Exception as e:  # noqa: BLE001 - every outcome is reported, the sanitizer decides
                outcome = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            print(f"{OUTCOME} {i} {outcome}", flush=True)
        print(DONE, flush=True)


if __name__ == "__main__":  # the child that runs the cases under the sanitizer (the command: fuzz.cli.sanitize)
    _child(*sys.argv[2:6])
