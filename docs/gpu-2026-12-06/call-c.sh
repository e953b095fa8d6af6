# Device call C of 2026-12-06 (issues 31 and 33), what calls A (glue.sh) and B (speed.sh) left: (d) a campaign of the
# seven core FlashInfer 0.7.4 fuzz tests from an EMPTY kernel cache with the warm-up inside it (--warm); vLLM 0.34.0's
# spec-decode GDN kernels (vllm-recurrent, vllm-sigmoid, vllm-mtp: decode, verify, serving, chains; the .vllm bundle
# rebuilt with the loader's whole closure), masks off; then the 16-worker point of the sweep from the cache (d) filled.
# Each step writes into $R and $R is packed into $OUT every 30 s. DRY=1: the same on the CPU, tiny boxes.
. docs/gpu-2026-12-06/setup.sh
if [ "${DRY:-0}" = 1 ]; then
  : ${N:=2} ${BOX:=5} ${VBOX:=5} ${TAIL:=200} ${MIN_BOX:=2} ${SHRINK:=5} ${LIMIT:=1500} ${VW:=2}
  CORE="(flashinfer-bf16 or flashinfer-mtp-fp32) and (test_decode or test_verify)"
else
  . .vllm/use.sh
fi
packing 30
note "start: $(head -1 $R/machine.txt)"
$PY scripts/vllm_bundle_check.py > $R/vllm-bundle.txt 2>&1; note "vllm bundle check: exit $?"

# (d) from an empty kernel cache, the warm-up inside the campaign
K=$K-cold; rm -rf $K
campaign d-cold ${N:-14} 2 ${BOX:-120} --warm --warm-jobs ${WJOBS:-6}
pack

# vLLM 0.34.0 on the GPU, masks off
V=$(( $(left) - 90 )); [ $V -gt ${VBOX:-90} ] && V=${VBOX:-90}
if [ $V -ge ${MIN_BOX:-10} ]; then
  timeout $(( V + 80 )) $PY -m pytest fuzz/test_decode.py fuzz/test_verify.py fuzz/test_serving.py fuzz/test_chain.py \
    -k vllm --hypothesis-profile=$PROFILE -n ${VW:-12} -p no:warnings --gdn-isolate --gdn-masks none \
    --gdn-test-seconds $V --gdn-shrink-seconds 20 --gdn-report $R/vllm.json --gdn-corpus-out $R/vllm-corpus -rfE \
    > $R/vllm.out 2>&1
  note "vllm: $V s per test: exit $?"
else note "vllm: skipped ($(left) s left)"; fi
pack

# the sweep's 16-worker point, from the cache (d) filled
campaign sweep-n16 16 3 ${WALL16:-30}
note "end"
kill $PACKER; pack
