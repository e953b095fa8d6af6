# Issue 21, the run that remains (needs the device kind nvidia-h200-x2, not lent so far): the FlashInfer 0.7.4
# campaign on both GPUs of one host at once, then on one GPU of it, back to back, with one kernel cache and one
# merged report each. xdist worker gwN takes GPU N mod count (fuzz/suite/plugin.py), heavy checks hold a per-GPU lock.
#   run(command="bash docs/h200-x2/call.sh", kind="nvidia-h200-x2", carry=[".gpu", ".gpu-fi"], timeout_s=600)
# DRY=1 bash docs/h200-x2/call.sh: the same commands on a CPU (profile ci, the stand-in) as a check of the script.
. docs/h200-2026-12-02b/setup.sh
export GDN_KERNEL_CACHE=/tmp/gdn-kernels
( while sleep 60; do pack; done ) & PACKER=$!
nvidia-smi -L > $R/gpus.txt 2>&1 || echo "no GPU (dry run)" > $R/gpus.txt
for gpus in "0,1" "0"; do
  name=gpus-${gpus/,/-}
  CUDA_VISIBLE_DEVICES=$gpus timeout 280 $PY -m fuzz campaign flashinfer- --profile $PROFILE \
    --test-seconds ${BOX:-40} --shrink-seconds 10 --workers ${WORKERS:-16} --masks release --timeout ${RUN_TIMEOUT:-250} \
    --out $R/$name $(release 0.7.4 $GDN_FI_SITE) \
    --pytest --gdn-isolate -p no:warnings --gdn-kernel-cache $GDN_KERNEL_CACHE --ignore=fuzz/test_corpus.py \
    "${STANDIN[@]}" > $R/$name.out 2>&1
  echo "campaign exit $?" >> $R/$name.out
done
kill $PACKER 2>/dev/null; pack
