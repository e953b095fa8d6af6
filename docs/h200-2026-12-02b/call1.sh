# H200 call 1 (issue 17, "Reach"): one campaign over the five FlashInfer releases, known-bug masks off, an example
# database of each run's own (--db-per-run: times to first hit from nothing), 45 s per fuzz test, every check in an
# isolated worker (crashes attributed), three xdist workers per release. Every fuzz test of the family but the large
# pools (call 2: they hold the GPU one at a time) and the corpus replay. A run still going at 470 s is killed: its
# cut-off shrinks are reported "not minimal" and resumed in call 2 (--resume).
. docs/h200-2026-12-02b/setup.sh
( while sleep 60; do pack; done ) & PACKER=$!
timeout 540 $PY -m fuzz campaign flashinfer- --profile $PROFILE --test-seconds ${BOX:-45} --shrink-seconds 20 \
  --workers ${WORKERS:-3} --masks none --db-per-run --timeout ${RUN_TIMEOUT:-470} --out $R/call1 \
  $(release 0.7.4 $GDN_FI_SITE) $(release 0.7.2.post1 $GDN_FI_SITE_fi072p1) $(release 0.6.16.post4 $GDN_FI_SITE_fi0616p4) \
  $(release 0.6.11 $GDN_FI_SITE_fi0611) $(release 0.6.10 $GDN_FI_SITE_fi0610) \
  --pytest --gdn-isolate -p no:warnings --ignore=fuzz/test_large_pool.py --ignore=fuzz/test_corpus.py \
  "${STANDIN[@]}" > $R/call1.out 2>&1
echo "campaign exit $?" >> $R/call1.out
kill $PACKER 2>/dev/null; pack
