# H200 call 2 (2026-12-03c, issue 19): (1) the probe of the corpus entry that passed on 0.7.2.post1 in call 1
# (call2-probe.sh); (2) the two FlashInfer issues of docs/issues-2026-12-03 exported and run on the GPU, each on the
# release its corpus entry names: (a) bf16 sliced intermediate on 0.7.2.post1, (b) MTP fp16 output on 0.7.4.
. docs/h200-2026-12-03c/setup.sh
( sleep 540; pack ) &  # if something overruns, what is there still comes back
. docs/h200-2026-12-03c/call2-probe.sh
mkdir -p $R/issues
if [ "${DRY:-0}" = 1 ]; then A=$PYTHONPATH; else A=$GDN_FI_PYTHONPATH_fi072p1:$PWD; fi
PYTHONPATH=$A OUT=$R/issues PYTHON=$PY timeout 200 bash docs/issues-2026-12-03/export.sh \
  flashinfer-bf16-verify-IntermediateMismatch-0 > $R/issues/export.out 2>&1
OUT=$R/issues PYTHON=$PY timeout 200 bash docs/issues-2026-12-03/export.sh \
  flashinfer-mtp-fp32-verify-PoolCorruption-0 >> $R/issues/export.out 2>&1
pack
