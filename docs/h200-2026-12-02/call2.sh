# H200 call 2 (2026-12-02): throughput, nothing else on the machine. FlashInfer 0.7.4 (the .gpu bundle), known-bug masks
# of that release on. (1) bench/throughput.py: one process, cold then warm compile caches, the time split per target;
# (2) pytest-xdist workers: 30 s campaigns at 4, 8 and 16 workers (shards so each worker has two fuzz tests); (3) the
# 5-minute campaign at the best worker count, the compile caches of (2) kept (a previous run's are allowed).
. docs/h200-2026-12-02/setup.sh
CORE="flashinfer- and (test_decode or test_mtp_verify or test_prefill) and not cake and not replayssm"
timeout ${BENCH_S:-80} $PY bench/throughput.py --profile $PROFILE --examples ${BENCH_N:-10} -k flashinfer- \
  "${STANDIN[@]/--gdn-target/--override}" > $R/bench.txt 2>&1
echo "bench exit $?" >> $R/bench.txt
campaign() {  # $1 workers, $2 seconds of wall, $3 out: 7 core fuzz tests x shards, two per worker
  local n=$1 wall=$2 shards=$(( ($1 * 2 + 6) / 7 )); local box=$(( wall * n / (7 * shards) ))
  timeout $(( wall * 2 + 90 )) $PY -m fuzz campaign flashinfer- --profile $PROFILE --test-seconds $box \
    --shrink-seconds 20 --workers $n --masks release --timeout $(( wall * 2 + 60 )) --out $3 \
    --pytest -k "$CORE" --gdn-shards $shards -p no:warnings "${STANDIN[@]}" > $3.out 2>&1
  echo "$n workers, $shards shards, $box s boxes: exit $?" >> $R/sweep.txt
  grep -h "distinct cases per minute" $3/summary.md >> $R/sweep.txt
}
for n in ${SWEEP:-4 8 16}; do campaign $n ${SWEEP_S:-30} $R/sweep-n$n; done
best=$(for n in ${SWEEP:-4 8 16}; do grep -h "distinct cases per minute" $R/sweep-n$n/summary.md | \
  sed "s/.*\*\*\([0-9]*\) distinct.*/\1 $n/"; done | sort -n | tail -1 | cut -d' ' -f2)
echo "best: ${best:=8} workers" >> $R/sweep.txt
campaign $best ${CAMPAIGN_S:-300} $R/campaign5
pack
