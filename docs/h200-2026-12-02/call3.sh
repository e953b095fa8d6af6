# H200 call 3 (2026-12-02): the upgrade gate, FlashInfer 0.7.2.post1 (baseline) vs 0.7.4 (candidate), alone on the
# machine: both sides at once, 60 s per fuzz test, six xdist workers a side, every check isolated.
. docs/h200-2026-12-02/setup.sh
timeout ${GATE_T:-540} $PY -m fuzz gate --baseline $GDN_FI_SITE_fi072p1 --candidate $GDN_FI_SITE --profile $PROFILE \
  --families flashinfer --parallel --out $R/gate -- --gdn-test-seconds ${BOX:-60} --gdn-shrink-seconds 30 -n 6 \
  --gdn-isolate -p no:warnings "${STANDIN[@]}" > $R/gate.out 2>&1
echo "gate exit $?" >> $R/gate.out
pack
