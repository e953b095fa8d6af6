# H200 call 1 (2026-12-01): a FlashInfer / fla / SGLang campaign (300 s per family, isolated), the corpus replay
# and the exported corpus scripts for FlashInfer 0.7.4 and 0.7.2.post1, and probes of the two root causes read in
# the wheels last session. All at once; every job is time-boxed so that the results are packed before the limit.
. docs/h200-2026-12-01/setup.sh
timeout 520 python3 scripts/gpu_campaign.py --parallel --profile h200 --seconds 300 --test-seconds 50 \
  --shrink-seconds 180 --out $R/campaign flashinfer- fla- sglang- \
  --pytest --gdn-isolate --gdn-corpus-out $R/campaign/corpus > $R/campaign.out 2>&1 &
replay() {  # $1: tag; the corpus replay (strict xfails) and every corpus entry's exported script in a fresh process
  timeout 230 python3 -m pytest fuzz/test_corpus.py tests/test_export.py -k corpus --hypothesis-profile=h200 -q \
    -rs -p no:warnings -p no:cacheprovider > $R/corpus-$1.txt 2>&1; echo "rc $?" >> $R/corpus-$1.txt
}
( replay 074; PYTHONPATH=$GDN_FI_BASELINE_PYTHONPATH replay 072 ) &
WIDE=verify-B16-T2-H2-HV8-K128-V128-pool17-pad0-bf16state-bf16in-i32-vk-gate_mild-seed0-slots[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]-inter16x2+0
FP16=verify-B1-T2-H1-HV2-K128-V128-pool1-pad1-fp32state-fp16in-i32-vk-gate_mild-seed0-slots[-1]
( timeout 200 python3 scripts/gpu_probe.py --target flashinfer-bf16 --grid B=15,16,31,32 H=1,2 G=4 -- $WIDE
  timeout 120 python3 scripts/gpu_probe.py --target flashinfer-mtp-fp32 $FP16 ${FP16/fp16in/bf16in} $FP16-noupdate
  PYTHONPATH=$GDN_FI_BASELINE_PYTHONPATH timeout 100 python3 scripts/gpu_probe.py --target flashinfer-bf16 \
    --grid B=15,16 H=2 G=4 -- $WIDE ) > $R/probes.txt 2>&1 &
wait
pack
