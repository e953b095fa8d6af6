#!/usr/bin/env bash
# Export the three reviewed issue bodies again (REVIEW.md), run each script once more on its own, and record each
# script's size and outcome line in runs.txt. From the repository root:
#     bash docs/issues-2026-12-06/export.sh
# On the CPU box of scripts/install.sh FlashInfer is not installed: (a)'s call is recorded against gdn-fuzz's CPU
# stand-in of the release its entry pins, its body installs that release, and its script says NOT RUN (no GPU). On a
# GPU host with that FlashInfer on PYTHONPATH, (a) records and runs against the real library.
# PYTHON picks the interpreter (default .venv/bin/python), OUT the folder (default this one).
set -u
OUT=${OUT:-docs/issues-2026-12-06}
PYTHON=${PYTHON:-.venv/bin/python}
case $PYTHON in */*) PYTHON="$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON")" ;; esac  # the scripts run elsewhere
: > "$OUT/runs.txt"
for name in flashinfer-bf16-verify-PoolCorruption-0 sglang-recurrent-decode-StateMismatch-0 \
    fla-recurrent-decode-AcceptedInvalidInput-0; do
    work=$(mktemp -d)
    "$PYTHON" -m fuzz export "corpus/$name.json" -o "$work/repro.py" --issue "$OUT/$name.md" > /dev/null 2>&1 || exit 2
    (cd "$work" && "$PYTHON" repro.py > out.txt 2>&1; echo "exit status $?" >> out.txt)
    {
        echo "$name: repro.py $(wc -c < "$work/repro.py") bytes, $(wc -l < "$work/repro.py") lines"
        sed 's/^/    /' "$work/out.txt"
    } >> "$OUT/runs.txt"
    rm -rf "$work"
done
cat "$OUT/runs.txt"
