# H200 call 3 (2026-12-01): the gate again (error ratios now come back from isolated workers; masks for the
# 0.7.2.post1 findings of call 2), the corpus replay and exported scripts with this session's new and updated
# entries on both releases, and probes of the strided-pool compile-key finding (its own kernel cache: the first
# probe must compile afresh).
. docs/h200-2026-12-01/setup.sh
timeout 470 python3 -m fuzz.gate gate --baseline $GDN_FI_BASELINE_SITE --candidate /tmp/site --profile h200 \
  --families flashinfer --examples 800 --parallel --out $R/gate -- --gdn-test-seconds 20 --gdn-isolate \
  > $R/gate.out 2>&1 &
replay() {
  timeout 200 python3 -m pytest fuzz/test_corpus.py tests/test_export.py -k corpus --hypothesis-profile=h200 -q \
    -rs -p no:warnings -p no:cacheprovider > $R/corpus-$1.txt 2>&1; echo "rc $?" >> $R/corpus-$1.txt
}
( replay 074; PYTHONPATH=$GDN_FI_BASELINE_PYTHONPATH replay 072 ) &
C=verify-B1-T2-H1-HV2-K128-V128-pool1-pad0-fp32state-bf16in-i32-vk-gate_mild-seed0-slots[0]-gap1
probe() { timeout 90 python3 scripts/gpu_probe.py --target flashinfer-mtp-fp32 "$@" 2>&1 | grep -v INFO; }
( export FLASHINFER_WORKSPACE_BASE=/tmp/fi_probe
  echo "== 0.7.2.post1"; PYTHONPATH=$GDN_FI_BASELINE_PYTHONPATH probe $C $C-warm1 $C-warm7 $C-warm1-inter1x2+0
  echo "== 0.7.4"; probe $C $C-warm1 $C-warm7 $C-warm1-inter1x2+0 ) > $R/probes.txt 2>&1 &
wait
pack
