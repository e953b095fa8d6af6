# H200 call 2 (2026-12-01): the upgrade gate, FlashInfer 0.7.2.post1 (baseline) vs 0.7.4 (candidate), both sides at
# once and isolated, beside the throughput benchmark of the FlashInfer rows (cold and warm compile caches).
. docs/h200-2026-12-01/setup.sh
timeout 540 python3 -m fuzz.gate gate --baseline $GDN_FI_BASELINE_SITE --candidate /tmp/site --profile h200 \
  --families flashinfer --examples 800 --parallel --out $R/gate -- --gdn-test-seconds 30 --gdn-isolate \
  > $R/gate.out 2>&1 &
timeout 420 python3 bench/throughput.py --profile h200 --examples 20 -k flashinfer- > $R/bench-flashinfer.txt 2>&1 &
wait
pack
