# Device-side set-up for issue 19 (trust), sourced from the repository root by call*.sh: the FlashInfer 0.7.4 +
# CuTe DSL + fla-core bundle (.gpu, scripts/pack_gpu_deps.sh) and the archive of older releases (.gpu-fi,
# FI_OVERLAYS="0.6.10 0.6.11 0.6.16.post4 0.7.2.post1"). DRY=1: the same commands on a CPU machine, profile ci, with
# FlashInfer's CPU stand-in imitating each release's signatures (a check of the scripts, not of FlashInfer).
set -u
if [ "${DRY:-0}" = 1 ]; then
  PROFILE=ci PY=${PY:-$PWD/.venv/bin/python} STANDIN=fuzz.standins.flashinfer_cpu
  BASE=(--baseline $PY --baseline-override flashinfer=$STANDIN:release_0_7_2)
  CAND=(--candidate $PY --candidate-override flashinfer=$STANDIN:release_0_7_4)
else
  . .gpu/gpu_env.sh && . .gpu-fi/use.sh
  PROFILE=h200 PY=python3
  BASE=(--baseline $GDN_FI_SITE_fi072p1) CAND=(--candidate /tmp/site)
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
R=/tmp/r && rm -rf $R && mkdir -p $R
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no GPU (dry run)"
  nproc; $PY -c "import torch, hypothesis, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, \
'hypothesis', hypothesis.__version__, 'cuda', torch.cuda.is_available())"; } > $R/machine.txt 2>&1
# $OUT returns at most 8 files: everything under $R goes back as one archive
pack() { tar -C /tmp -cJf ${OUT:-/tmp/out}/results.tar.xz r; ls -la ${OUT:-/tmp/out}; }
