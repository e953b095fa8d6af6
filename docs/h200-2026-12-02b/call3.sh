# H200 call 3 (issue 17, "Reach"): the serving tests of the five releases again, masks off, own example databases,
# 60 s each, isolated, three xdist workers per release, after serving began to draw without the release's single-call
# known bugs (fuzz.model.known_bugs.serving_bugs: in calls 1-2 they ended most sequences at their first call, and
# bf16 serving checked 5 distinct cases in 45 s). Does OutputAliased (bf16-cached-output, 0.6.11-0.6.16.post4) fall now?
. docs/h200-2026-12-02b/setup.sh
( while sleep 60; do pack; done ) & PACKER=$!
timeout 330 $PY -m fuzz campaign flashinfer- --profile $PROFILE --test-seconds ${BOX:-60} --shrink-seconds 20 \
  --workers ${WORKERS:-3} --masks none --db-per-run --timeout ${RUN_TIMEOUT:-300} --out $R/call3 \
  $(release 0.7.4 $GDN_FI_SITE) $(release 0.7.2.post1 $GDN_FI_SITE_fi072p1) $(release 0.6.16.post4 $GDN_FI_SITE_fi0616p4) \
  $(release 0.6.11 $GDN_FI_SITE_fi0611) $(release 0.6.10 $GDN_FI_SITE_fi0610) \
  --pytest --gdn-isolate -p no:warnings --ignore=fuzz/test_decode.py --ignore=fuzz/test_mtp_verify.py \
  --ignore=fuzz/test_prefill.py --ignore=fuzz/test_large_pool.py --ignore=fuzz/test_corpus.py "${STANDIN[@]}" \
  > $R/call3.out 2>&1
echo "campaign exit $?" >> $R/call3.out
kill $PACKER 2>/dev/null; pack
