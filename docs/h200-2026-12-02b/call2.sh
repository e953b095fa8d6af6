# H200 call 2 (issue 17, "Reach"): (a) the large-pool tests of the five releases (slot offsets past 2^31 and 2^32
# elements, a 2^31-element guard below each pool; one large case on the GPU at a time), masks off, own example
# databases, 45 s per test, isolated, one xdist worker per release; (b) beside it, the cut-off shrinks of call 1
# resumed from its live logs (--resume: fuzz.run.reduce), in short runs of the other tests.
. docs/h200-2026-12-02b/setup.sh
( while sleep 60; do pack; done ) & PACKER=$!
RELEASES="$(release 0.7.4 $GDN_FI_SITE) $(release 0.7.2.post1 $GDN_FI_SITE_fi072p1) \
  $(release 0.6.16.post4 $GDN_FI_SITE_fi0616p4) $(release 0.6.11 $GDN_FI_SITE_fi0611) $(release 0.6.10 $GDN_FI_SITE_fi0610)"
timeout 500 $PY -m fuzz campaign flashinfer- --profile $PROFILE --test-seconds ${BOX:-45} --shrink-seconds 20 \
  --workers 1 --masks none --db-per-run --timeout ${RUN_TIMEOUT:-440} --out $R/call2-large $RELEASES \
  --pytest --gdn-isolate -p no:warnings --ignore=fuzz/test_corpus.py --ignore=fuzz/test_decode.py \
  --ignore=fuzz/test_mtp_verify.py --ignore=fuzz/test_prefill.py --ignore=fuzz/test_serving.py \
  "${STANDIN[@]}" > $R/call2-large.out 2>&1 &
LARGE=$!
if [ -d "${CALL1:-docs/h200-2026-12-02b/call1}" ]; then
  timeout 480 $PY -m fuzz campaign flashinfer- --profile $PROFILE --test-seconds 2 --shrink-seconds 60 \
    --workers 1 --masks none --db-per-run --timeout 420 --out $R/call2-resume --resume ${CALL1:-docs/h200-2026-12-02b/call1} \
    $RELEASES --pytest --gdn-isolate -p no:warnings --ignore=fuzz/test_large_pool.py --ignore=fuzz/test_corpus.py \
    "${STANDIN[@]}" > $R/call2-resume.out 2>&1
  echo "resume exit $?" >> $R/call2-resume.out
fi
wait $LARGE; echo "large exit $?" >> $R/call2-large.out
kill $PACKER 2>/dev/null; pack
