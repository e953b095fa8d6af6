# H200 call 2 (issue 18): the worker sweep, from a warm kernel cache: 4, 8, 16 and 32 xdist workers, each run the seven
# core fuzz tests in enough shards that every worker has one, each for the same wall time.
. docs/h200-2026-12-03b/setup.sh
( while sleep 45; do pack; done ) & PACKER=$!
rm -rf $K; warm call2
for n in ${SWEEP:-4 8 16 32}; do
  shards=$(( (n + 6) / 7 )); campaign sweep-n$n $n $shards $(( ${WALL:-40} * n / (7 * shards) + 1 ))
done
kill $PACKER; pack
