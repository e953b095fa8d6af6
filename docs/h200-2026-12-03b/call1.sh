# H200 call 1 (issue 18): `gdn-fuzz warm` into an empty kernel cache, then the 5-minute campaign of the seven core
# FlashInfer 0.7.4 fuzz tests (two shards each, 14 xdist workers, every check isolated) from that cache.
. docs/h200-2026-12-03b/setup.sh
( while sleep 45; do pack; done ) & PACKER=$!
rm -rf $K; warm call1
campaign campaign-warm ${N:-14} 2 ${BOX:-300}
du -sh $K > $R/cache-size.txt 2>&1
kill $PACKER; pack
