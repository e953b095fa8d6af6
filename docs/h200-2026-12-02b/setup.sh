# Device-side set-up for the lent H200 (no network), sourced from the repository root by call*.sh: the FlashInfer
# 0.7.4 + CuTe DSL + fla-core bundle (.gpu, scripts/pack_gpu_deps.sh) and one archive of four more FlashInfer releases
# (.gpu-fi, FI_OVERLAYS="0.6.10 0.6.11 0.6.16.post4 0.7.2.post1"). DRY=1: the same commands on a CPU machine, the
# profile ci and FlashInfer's CPU stand-in in place of the GPU, the bundle and the releases (a check of the scripts).
set -u
if [ "${DRY:-0}" = 1 ]; then
  PROFILE=ci; STANDIN=(--gdn-target flashinfer=fuzz.standins.flashinfer_cpu); PY=${PY:-.venv/bin/python}
  for t in fi0610 fi0611 fi0616p4 fi072p1; do mkdir -p /tmp/dry-$t; export GDN_FI_SITE_$t=/tmp/dry-$t; done
  export GDN_FI_SITE=/tmp/dry-site; mkdir -p $GDN_FI_SITE
else
  . .gpu/gpu_env.sh && . .gpu-fi/use.sh
  PROFILE=h200; STANDIN=(); PY=python3; export GDN_FI_SITE=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
R=/tmp/r && mkdir -p $R
{ nvidia-smi --query-gpu=name,driver_version,memory.total,memory.free --format=csv,noheader 2>/dev/null \
    || echo "no GPU (dry run)"
  $PY -c "import torch, hypothesis, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'hypothesis', \
hypothesis.__version__, 'cuda', torch.cuda.is_available())"; } > $R/machine.txt 2>&1
# $OUT returns at most 8 files: everything under $R goes back as one archive, packed as results come in
pack() { tar -C /tmp -cJf ${OUT:-/tmp/out}/results.tar.xz r 2>/dev/null; }
release() { echo "--installation $1=$2"; }
