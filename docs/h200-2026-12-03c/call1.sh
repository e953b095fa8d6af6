# H200 call 1 (2026-12-03c, issue 19): the upgrade gate, FlashInfer 0.7.2.post1 (baseline) vs 0.7.4 (candidate),
# alone on the machine: both sides at once, 60 s per fuzz test (30 s more to shrink), six xdist workers a side, every
# check isolated. The gate's own preflight checks that each side loads its FlashInfer and that they differ.
. docs/h200-2026-12-03c/setup.sh
GATE_T=${GATE_T:-520}
( sleep $((GATE_T + 10)); pack ) &  # if the gate overruns, what it wrote still comes back
timeout $GATE_T $PY -m fuzz gate "${BASE[@]}" "${CAND[@]}" --profile $PROFILE --families flashinfer --parallel \
  --out $R/gate -- --gdn-test-seconds ${BOX:-60} --gdn-shrink-seconds 30 -n ${WORKERS:-6} --gdn-isolate \
  -p no:warnings > $R/gate.out 2>&1
echo "gate exit $?" >> $R/gate.out
pack
