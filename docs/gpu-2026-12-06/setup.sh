# Device-side set-up for issue 33 (speed II), sourced from the repository root by speed.sh. Needs no other file of
# docs/: everything it uses is in this folder or the package. Carry: .gpu (FlashInfer 0.7.4 + CuTe DSL + fla-core),
# .gpu-fi (the 0.7.2.post1 overlay, $GDN_FI_SITE_fi072p1). The kernel cache under test is $K, given to every command
# (--gdn-kernel-cache / --kernel-cache), so the bundle's own cache variables are dropped.
# DRY=1 runs the same commands on a CPU machine: profile ci, FlashInfer's CPU stand-in imitating each release
# (dry_standins.py here: the release's signatures and preconditions, with the bf16 wide_vec write-back bug those
# releases ship), no bundle, tiny durations. A check of the script, not of FlashInfer.
set -u
HERE=docs/gpu-2026-12-06
if [ "${DRY:-0}" = 1 ]; then
  PROFILE=ci PY=${PY:-$PWD/.venv/bin/python} STANDIN=dry_standins
  export PYTHONPATH=$PWD/$HERE${PYTHONPATH:+:$PYTHONPATH}
  FI074=(--gdn-target flashinfer=$STANDIN:release_0_7_4) WARM074=(--override flashinfer=$STANDIN:release_0_7_4)
  FI072=(--gdn-target flashinfer=$STANDIN:release_0_7_2)
  SITE074=$PY SITE072=$PY  # one interpreter: each release is an override (two campaigns where the device has one)
else
  . .gpu/gpu_env.sh && . .gpu-fi/use.sh
  unset FLASHINFER_WORKSPACE_BASE TRITON_CACHE_DIR
  PROFILE=h200 PY=python3 FI074=() WARM074=() FI072=()
  # directories put first on PYTHONPATH: the bundle's site, and the 0.7.2.post1 overlay (either .gpu-fi layout)
  SITE074=${GDN_FI_SITE:-/tmp/site} SITE072=${GDN_FI_SITE_fi072p1:-${GDN_FI_BASELINE_SITE:-/tmp/site-fi072p1}}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
R=${R:-/tmp/r} K=${K:-/tmp/kernels}; rm -rf $R; mkdir -p $R ${OUT:-/tmp/out}
CORE="flashinfer- and (test_decode or test_verify or test_prefill) and not cake and not replayssm"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,memory.free --format=csv,noheader 2>/dev/null || echo no GPU
  nproc; $PY -c "import torch, hypothesis; print('torch', torch.__version__, 'hypothesis', hypothesis.__version__)"
  git log -1 --format='%H %s' 2>/dev/null | cut -c1-120
} > $R/machine.txt 2>&1
START=$(date +%s)
left() { echo $(( ${LIMIT:-560} - ($(date +%s) - START) )); }  # seconds left of the call's own limit
# One archive, replaced atomically: a call cut off at its limit still returns the last complete one.
pack() { local tmp=${OUT:-/tmp/out}/.results.$BASHPID; tar -C $(dirname $R) -cJf $tmp $(basename $R) 2>/dev/null \
  && mv $tmp ${OUT:-/tmp/out}/results.tar.xz; }
packing() { ( while sleep ${1:-30}; do pack; done ) & PACKER=$!; }
note() { echo "[$(( $(date +%s) - START )) s] $*" >> $R/runs.txt; }
warm() {  # $1 label, $2 seconds at most: compile the 0.7.4 plan (masks of the release) into $K (12 processes:
  # cores left for what runs beside it)
  /usr/bin/time -f "warm wall %e s" timeout $2 $PY -m fuzz warm --profile $PROFILE -k flashinfer- \
    --jobs ${JOBS:-12} --masks release --kernel-cache $K "${WARM074[@]}" > $R/$1.out 2>&1
  note "$1: warm exit $?: $(grep -h 'gdn-fuzz warm:' $R/$1.out | tail -1 | cut -c1-200)"
}
campaign() {  # $1 label, $2 xdist workers, $3 shards, $4 seconds per test, then more campaign arguments: the 7 core
  # fuzz tests of 0.7.4 under its release's masks, every check isolated; its test box cut to the time left
  local label=$1 n=$2 shards=$3 box=$4 tail=${TAIL:-60}; shift 4
  local room=$(( $(left) - tail - 10 )); [ $box -gt $room ] && box=$room
  if [ $box -lt ${MIN_BOX:-10} ]; then note "$label: skipped ($box s per test; $(left) s left)"; return; fi
  timeout $(( box + tail )) $PY -m fuzz campaign flashinfer- --profile $PROFILE --test-seconds $box \
    --shrink-seconds ${SHRINK:-15} --workers $n --masks release --timeout $(( box + tail - 5 )) \
    --out $R/$label "$@" --pytest --gdn-isolate --gdn-shards $shards --gdn-kernel-cache $K -k "$CORE" \
    -p no:warnings -o faulthandler_timeout=$(( box + tail )) "${FI074[@]}" > $R/$label.out 2>&1
  note "$label: $n workers, $shards shards, $box s per test: exit $?"
  grep -h "distinct cases per minute" $R/$label/summary.md >> $R/runs.txt 2>/dev/null
}
