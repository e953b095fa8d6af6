# GPU call of 2026-12-06 (issue 33, speed II): ONE call, at most 9.5 minutes (each step cut to the time left, LIMIT s;
# each writes into $R as it finishes and $R is packed into $OUT every 30 s, so a cut-off call returns what ran):
#  (c) beside (b)'s warm-up: masks off, a fresh example database per run, 60 s per test, the bf16-state verify test on
#      0.7.2.post1 and 0.7.4 in one campaign (two installations sharing the GPU): `wide-vec-no-writeback` must be found
#      on both within 15 s (the threshold plan's cases come first). Its times are under the warm-up's load, its kernel
#      cache the one the warm-up fills (threshold plans first; 0.7.2.post1's own directory starts empty).
#  (b) `gdn-fuzz warm` of 0.7.4's plan into an empty $K, then a campaign of the seven core FlashInfer 0.7.4 fuzz tests
#      (masks of the release, two shards each, $N xdist workers, every check isolated), BOX s per test: distinct cases
#      per minute of wall, per target and operation (its summary.md).
#  (a) the worker sweep behind `--gdn-workers auto` from the warm cache: 4, 8, 16 workers, about WALL s each; its
#      table (sweep.md) gives the count for fuzz/run/workers.py SWEEPS for this GPU model.
#  (d) if time remains: the campaign of (b) from an EMPTY kernel cache with the warm-up beside it (--warm).
# DRY=1: the same on a CPU machine with tiny durations (see setup.sh).
. docs/gpu-2026-12-06/setup.sh
if [ "${DRY:-0}" = 1 ]; then  # a loaded 2-core machine: four of the core tests, starts of tens of seconds
  : ${N:=2} ${BOX:=5} ${CBOX:=25} ${WALL:=14} ${SWEEP:=1 2} ${TAIL:=240} ${WARM_S:=60} ${MIN_BOX:=2} ${SHRINK:=5}
  : ${LIMIT:=1800}
  CORE="(flashinfer-bf16 or flashinfer-mtp-fp32) and (test_decode or test_verify)"
fi
packing 30
rm -rf $K
note "start: $(head -1 $R/machine.txt)"

# (b) warm-up, with (c) beside it
warm b-warm ${WARM_S:-170} & WARMING=$!
C=(--profile $PROFILE --test-seconds ${CBOX:-60} --shrink-seconds ${SHRINK:-15} --masks none --db-per-run
   --timeout $(( ${CBOX:-60} + ${TAIL:-60} )))
CP=(--gdn-isolate --gdn-kernel-cache $K -k test_verify -p no:warnings)  # the cache the warm-up fills
if [ "${DRY:-0}" = 1 ]; then  # one interpreter: a campaign per release (its override), side by side
  timeout $(( ${CBOX:-60} + ${TAIL:-60} + 20 )) $PY -m fuzz campaign flashinfer-bf16 "${C[@]}" --out $R/c-072 \
    --installation 0.7.2.post1=$SITE072 --pytest "${CP[@]}" "${FI072[@]}" > $R/c-072.out 2>&1 & C072=$!
  timeout $(( ${CBOX:-60} + ${TAIL:-60} + 20 )) $PY -m fuzz campaign flashinfer-bf16 "${C[@]}" --out $R/c-074 \
    --installation 0.7.4=$SITE074 --pytest "${CP[@]}" "${FI074[@]}" > $R/c-074.out 2>&1
  wait $C072
else
  timeout $(( ${CBOX:-60} + ${TAIL:-60} + 20 )) $PY -m fuzz campaign flashinfer-bf16 "${C[@]}" --out $R/c \
    --installation 0.7.2.post1=$SITE072 --installation 0.7.4=$SITE074 --pytest "${CP[@]}" > $R/c.out 2>&1
fi
note "(c) masks off, bf16 verify, 0.7.2.post1 and 0.7.4: exit $?"
grep -h "wide-vec-no-writeback" $R/c*/summary.md >> $R/runs.txt 2>/dev/null || note "(c) wide-vec-no-writeback: not found"
pack
wait $WARMING
pack

# (b) the campaign from the warm cache
campaign b-campaign ${N:-14} 2 ${BOX:-150}
pack

# (a) the worker sweep: the 7 core tests in enough shards that every worker has one, about WALL s of fuzzing each
for n in ${SWEEP:-4 8 16}; do
  shards=$(( (n + 6) / 7 ))
  campaign sweep-n$n $n $shards $(( ${WALL:-40} * n / (7 * shards) + 1 ))
  pack
done
{ echo "| workers | distinct cases | seconds | per minute of wall |"; echo "|---|---|---|---|"
  for n in ${SWEEP:-4 8 16}; do
    $PY -c "import json,sys; r=json.load(open(sys.argv[1]))['runs']; d=sum(x['distinct'] for x in r); \
s=max(x['seconds'] for x in r); print(f'| {sys.argv[2]} | {d} | {s:.0f} | {60*d/max(s,1):.0f} |')" \
      $R/sweep-n$n/summary.json $n 2>/dev/null || echo "| $n | (not run) | | |"
  done
  head -1 $R/machine.txt; } > $R/sweep.md
cat $R/sweep.md >> $R/runs.txt

# (d) from an empty kernel cache, the warm-up inside the campaign, with what is left
K=$K-cold; rm -rf $K
campaign d-cold ${N:-14} 2 ${BOX:-150} --warm --warm-jobs ${WJOBS:-6}
note "end"
kill $PACKER; pack
