#!/usr/bin/env bash
# Export issues (a) FlashInfer bf16 and (b) FlashInfer MTP again, then run each script once more on its own.
# On the H200: FlashInfer on PYTHONPATH, the repository root as the working directory:
#     bash docs/issues-2026-12-03/export.sh [CORPUS_NAME ...]   (default: both; each on the release its entry names,
#     e.g. PYTHONPATH=$GDN_FI_PYTHONPATH_fi072p1:$PWD for (a), whose bug 0.7.4 fixed)
# DRY=1: the same commands against gdn-fuzz's CPU stand-in of FlashInfer (--module), for a CPU box.
# Results under ${OUT:-/tmp/out}: NAME.py (the script), NAME.md (the issue body), NAME.out (the script's output and
# exit status). PYTHON picks the interpreter (default python3).
set -u
OUT=${OUT:-/tmp/out}
PYTHON=${PYTHON:-python3}
MODULE=()
if [ "${DRY:-0}" = 1 ]; then
    MODULE=(--module fuzz.standins.flashinfer_cpu)
fi
mkdir -p "$OUT"
[ $# -gt 0 ] || set -- flashinfer-bf16-verify-IntermediateMismatch-0 flashinfer-mtp-fp32-verify-PoolCorruption-0
for name in "$@"; do
    "$PYTHON" -m fuzz export "corpus/$name.json" "${MODULE[@]}" -o "$OUT/$name.py" --issue "$OUT/$name.md" || exit 2
    (cd "$OUT" && "$PYTHON" "$name.py" > "$name.out" 2>&1; echo "exit status $?" >> "$name.out")
    tail -n 2 "$OUT/$name.out"
done
