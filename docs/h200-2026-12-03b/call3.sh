# H200 call 3 (issue 18): the campaign of call 1 from an empty kernel cache (cold), in the device time left: 75 s per
# test. pytest dumps the stacks of a test still running 60 s past its box (the shard that never reported in calls 1-2).
. docs/h200-2026-12-03b/setup.sh
( while sleep 30; do pack; done ) & PACKER=$!
rm -rf $K; campaign campaign-cold ${N:-14} 2 ${BOX:-75}
kill $PACKER; pack
