# H200 call 4 (2026-12-01): the strided-pool compile-key entry as corrected after call 3 (a 1-slot view is contiguous
# to torch and takes the flat path), FlashInfer 0.7.2.post1: each probe and the replay in a kernel cache of its own.
. docs/h200-2026-12-01/setup.sh
export PYTHONPATH=$GDN_FI_BASELINE_PYTHONPATH
C=verify-B1-T2-H1-HV2-K128-V128-pool2-pad0-fp32state-bf16in-i32-vk-gate_mild-seed0-slots[1]-gap1
for c in $C $C-warm1; do
  FLASHINFER_WORKSPACE_BASE=/tmp/ws-${c##*-} timeout 60 python3 scripts/gpu_probe.py --target flashinfer-mtp-fp32 $c
done 2>&1 | grep -v INFO | cut -c1-400 > $R/probes.txt
FLASHINFER_WORKSPACE_BASE=/tmp/ws-replay timeout 120 python3 -m pytest fuzz/test_corpus.py tests/test_export.py \
  -k "RejectedValidInput-1" --hypothesis-profile=h200 -q -rs -p no:warnings -p no:cacheprovider \
  > $R/corpus-072.txt 2>&1; echo "rc $?" >> $R/corpus-072.txt
pack
