# H200 call 3 (2026-12-03c, issue 19), on the session's final code: the gate of call 1 again (0.7.2.post1 vs 0.7.4,
# 60 s boxes) after the corpus range fix and the release contracts as data, then the two FlashInfer issues exported
# again and run, each on its entry's release, as docs/issues-2026-12-03 keeps them.
. docs/h200-2026-12-03c/setup.sh
( sleep 560; pack ) &  # if something overruns, what is there still comes back
timeout ${GATE_T:-400} $PY -m fuzz gate "${BASE[@]}" "${CAND[@]}" --profile $PROFILE --families flashinfer --parallel \
  --out $R/gate -- --gdn-test-seconds ${BOX:-60} --gdn-shrink-seconds 30 -n ${WORKERS:-6} --gdn-isolate \
  -p no:warnings > $R/gate.out 2>&1
echo "gate exit $?" >> $R/gate.out
mkdir -p $R/issues
if [ "${DRY:-0}" = 1 ]; then A=$PYTHONPATH; else A=$GDN_FI_PYTHONPATH_fi072p1:$PWD; fi
PYTHONPATH=$A OUT=$R/issues PYTHON=$PY timeout 60 bash docs/issues-2026-12-03/export.sh \
  flashinfer-bf16-verify-IntermediateMismatch-0 > $R/issues/export.out 2>&1
OUT=$R/issues PYTHON=$PY timeout 60 bash docs/issues-2026-12-03/export.sh \
  flashinfer-mtp-fp32-verify-PoolCorruption-0 >> $R/issues/export.out 2>&1
rm -f $R/gate/*.json  # the sides' full reports (7 MB) stay here; summary, logs and report.html come back
pack
