# Device-side set-up for issue 18 (speed), sourced from the repository root by call*.sh: FlashInfer 0.7.4 alone on
# the H200 (the .gpu bundle of scripts/pack_gpu_deps.sh; nothing else running). The kernel cache under test is $K,
# given to every command (--gdn-kernel-cache / --kernel-cache), so the bundle's own cache variables are dropped.
# DRY=1 checks the scripts on a CPU machine: profile ci, FlashInfer's CPU stand-in, no bundle.
set -u
if [ "${DRY:-0}" = 1 ]; then
  PROFILE=ci PY=${PY:-.venv/bin/python} STANDIN=fuzz.standins.flashinfer_cpu
  FI=(--gdn-target flashinfer=$STANDIN) WARM=(--override flashinfer=$STANDIN)
else
  . .gpu/gpu_env.sh && unset FLASHINFER_WORKSPACE_BASE TRITON_CACHE_DIR
  PROFILE=h200 PY=python3 FI=() WARM=()
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
R=/tmp/r K=/tmp/kernels; mkdir -p $R
CORE="flashinfer- and (test_decode or test_mtp_verify or test_prefill) and not cake and not replayssm"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,memory.free --format=csv,noheader 2>/dev/null || echo no GPU
  nproc; $PY -c "import torch, hypothesis; print('torch', torch.__version__, 'hypothesis', hypothesis.__version__)"
} > $R/machine.txt 2>&1
pack() { tar -C /tmp -cJf ${OUT:-/tmp/out}/results.tar.xz r 2>/dev/null; }  # one archive: $OUT keeps few files
warm() {  # compile the plan into $K; its time and summary in $R/warm-$1.out
  /usr/bin/time -f "warm wall %e s" timeout ${WARM_S:-170} $PY -m fuzz warm --profile $PROFILE -k flashinfer- \
    --jobs ${JOBS:-16} --kernel-cache $K "${WARM[@]}" > $R/warm-$1.out 2>&1; echo "warm exit $?" >> $R/warm-$1.out
}
campaign() {  # $1 label, $2 xdist workers, $3 shards, $4 seconds per test: the 7 core fuzz tests, every check isolated
  timeout $(( $4 + 150 )) $PY -m fuzz campaign flashinfer- --profile $PROFILE --test-seconds $4 --shrink-seconds 20 \
    --workers $2 --masks release --timeout $(( $4 + 120 )) --out $R/$1 --pytest --gdn-isolate --gdn-shards $3 \
    --gdn-kernel-cache $K -k "$CORE" -p no:warnings -o faulthandler_timeout=$(( $4 + 60 )) "${FI[@]}" > $R/$1.out 2>&1
  echo "$1: $2 workers, $3 shards, $4 s per test: exit $?" >> $R/runs.txt
  grep -h "distinct cases per minute" $R/$1/summary.md >> $R/runs.txt 2>/dev/null
}
