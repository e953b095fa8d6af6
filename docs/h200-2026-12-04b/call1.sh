# H200 call 1 of 2026-12-04b (issue 20), on the refactored pipeline (fuzz/model, fuzz/suite with one rounds engine,
# the session's worker pool, the FlashInfer adapters written once): (A) the installed 0.7.4 under its release's masks,
# every FlashInfer path and fla, isolated, over 6 workers: nothing new expected; (B) 0.7.2.post1 with masks off: the
# bugs that release shipped, found again. DRY=1 runs the same on the CPU with the stand-in imitating each release.
. docs/h200-2026-12-03c/setup.sh
( sleep 560; pack ) &  # if something overruns, what is there still comes back
if [ "${DRY:-0}" = 1 ]; then
  A=(--gdn-target flashinfer=$STANDIN:release_0_7_4); B=(--gdn-target flashinfer=$STANDIN:release_0_7_2); PB=$PYTHONPATH
else A=(); B=(); PB=$GDN_FI_PYTHONPATH_fi072p1:$PWD; fi
RUN=(--hypothesis-profile=$PROFILE --gdn-isolate -n ${WORKERS:-6} -p no:warnings)
timeout 230 $PY -m pytest fuzz/test_decode.py fuzz/test_mtp_verify.py fuzz/test_prefill.py fuzz/test_serving.py \
  -k "flashinfer or fla" "${RUN[@]}" --gdn-test-seconds ${BOX:-25} --gdn-shrink-seconds 15 \
  --gdn-report $R/a-074.json "${A[@]}" > $R/a-074.out 2>&1
echo "exit $?" >> $R/a-074.out
pack > /dev/null
PYTHONPATH=$PB timeout 230 $PY -m pytest fuzz/test_decode.py fuzz/test_mtp_verify.py -k flashinfer "${RUN[@]}" \
  --gdn-masks none --gdn-test-seconds ${BOX:-30} --gdn-shrink-seconds 20 --gdn-report $R/b-072.json "${B[@]}" \
  > $R/b-072.out 2>&1
echo "exit $?" >> $R/b-072.out
pack
