# H200 call 3 (run 2026-12-04, issue 19), on the session's final code: (1) the release contract on the real 0.7.4,
# installed and as a module that reports no release, through `gdn-fuzz probe`; (2) the two FlashInfer issues exported
# again and run, each on its entry's release, as docs/issues-2026-12-03 keeps them; (3) the gate of call 1 again
# (0.7.2.post1 vs 0.7.4, 60 s boxes) after the corpus range fix and the release contracts as data.
. docs/h200-2026-12-03c/setup.sh
( sleep 565; pack ) &  # if something overruns, what is there still comes back
C='decode-B3-T1-H1-HV2-K128-V128-pool3-pad0-fp32state-bf16in-i32-vk-gate_saturated-seed0-slots[0,1,2]'
if [ "${DRY:-0}" = 1 ]; then M=(--module flashinfer=$STANDIN:release_0_7_4); N=(--module flashinfer=$STANDIN)
else M=(); N=(--module flashinfer=flashinfer.gdn_decode); fi
{ echo "== installed 0.7.4 (the release's contract)"
  timeout 90 $PY -m fuzz probe "$C" "${C//K128-V128/K8-V8}" --target flashinfer-mtp-fp32 --target flashinfer-cake-fp32 \
    --target flashinfer-cake-bf16 "${M[@]}"; echo "exit $?"
  echo "== the same module given as an override, which reports no release (no contract: the library's own answer)"
  timeout 90 $PY -m fuzz probe "$C" "${C//K128-V128/K8-V8}" --target flashinfer-mtp-fp32 --target flashinfer-cake-fp32 \
    "${N[@]}"; echo "exit $?"; } > $R/probe.out 2>&1
pack > /dev/null  # each phase's results go back as they appear, not only at the end (a cut call returns what is there)
mkdir -p $R/issues
if [ "${DRY:-0}" = 1 ]; then A=$PYTHONPATH; else A=$GDN_FI_PYTHONPATH_fi072p1:$PWD; fi
PYTHONPATH=$A OUT=$R/issues PYTHON=$PY timeout 60 bash docs/issues-2026-12-03/export.sh \
  flashinfer-bf16-verify-IntermediateMismatch-0 > $R/issues/export.out 2>&1
OUT=$R/issues PYTHON=$PY timeout 60 bash docs/issues-2026-12-03/export.sh \
  flashinfer-mtp-fp32-verify-PoolCorruption-0 >> $R/issues/export.out 2>&1
pack > /dev/null
timeout ${GATE_T:-330} $PY -m fuzz gate "${BASE[@]}" "${CAND[@]}" --profile $PROFILE --families flashinfer --parallel \
  --out $R/gate -- --gdn-test-seconds ${BOX:-60} --gdn-shrink-seconds 30 -n ${WORKERS:-6} --gdn-isolate \
  -p no:warnings > $R/gate.out 2>&1
echo "gate exit $?" >> $R/gate.out
rm -f $R/gate/*.json  # the sides' full reports (7 MB) stay here; summary, logs and report.html come back
pack
