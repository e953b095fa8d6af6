# Device call A of 2026-12-06 (issue 31): SGLang 0.5.23's GDN glue (FlashInferGDNKernel on the SM90 path the GPU
# selects, TritonGDNKernel, the FlashInfer->Triton fallback, verify->commit->decode chains) with the real FlashInfer
# 0.7.4 and Triton, and vLLM 0.34.0's spec-decode GDN kernels, masks off, one box per test. DRY=1 runs the same on the
# CPU (the FlashInfer stand-in inside the glue, the Triton interpreter), ci profile, tiny boxes: a check of the script.
set -u
if [ "${DRY:-0}" = 1 ]; then
  PROFILE=ci PY=${PY:-$PWD/.venv/bin/python} BOX=${BOX:-8} SHRINK=5 WORKERS=${WORKERS:-2} LIMIT=${LIMIT:-400}
else
  . .gpu/gpu_env.sh && . .sgl/use.sh && . .vllm/use.sh
  PROFILE=h200 PY=python3 BOX=${BOX:-200} SHRINK=${SHRINK:-40} WORKERS=${WORKERS:-16} LIMIT=${LIMIT:-530}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
R=/tmp/r && rm -rf $R && mkdir -p $R
pack() { local tmp=${OUT:-/tmp/out}/.results.$BASHPID; tar -C /tmp -cJf $tmp r && mv $tmp ${OUT:-/tmp/out}/results.tar.xz; }
( while sleep 30; do pack; done ) & PACKER=$!  # results reach $OUT as they appear: a call cut at its limit keeps them
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no GPU (dry run)"
  nproc; $PY -c "import torch, triton, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, \
'triton', triton.__version__, 'cuda', torch.cuda.is_available())"; } > $R/machine.txt 2>&1
if [ "${DRY:-0}" != 1 ]; then
  $PY scripts/sgl_bundle_check.py > $R/sgl-bundle.txt 2>&1; $PY scripts/vllm_bundle_check.py > $R/vllm-bundle.txt 2>&1
fi
TESTS=$(ls fuzz/test_decode.py fuzz/test_verify.py fuzz/test_prefill.py fuzz/test_serving.py \
  fuzz/test_chain.py 2>/dev/null)
timeout $LIMIT $PY -m pytest $TESTS -k "glue or vllm" --hypothesis-profile=$PROFILE -n $WORKERS -p no:warnings \
  --gdn-isolate --gdn-masks none --gdn-test-seconds $BOX --gdn-shrink-seconds $SHRINK --gdn-report $R/glue.json \
  --gdn-corpus-out $R/corpus -rfE > $R/glue.out 2>&1
echo "exit $?" >> $R/glue.out
kill $PACKER; pack
tail -40 $R/glue.out
