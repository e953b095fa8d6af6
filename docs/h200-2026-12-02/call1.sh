# H200 call 1 (2026-12-02): the FlashInfer family on five releases at once, known-bug masks off (hunting): 15 s per
# fuzz test, two pytest-xdist workers per release, every check in an isolated worker process (a crash of one release's
# kernel is a KernelCrash of its run, nothing else). Every release compiles into a kernel cache of its own.
. docs/h200-2026-12-02/setup.sh
release() { echo "--installation $1=$2"; }
timeout 520 $PY -m fuzz campaign flashinfer- --profile $PROFILE --test-seconds ${BOX:-15} --shrink-seconds 30 \
  --workers 2 --masks none --timeout 480 --out $R/campaign \
  $(release 0.7.4 $GDN_FI_SITE) $(release 0.7.2.post1 $GDN_FI_SITE_fi072p1) $(release 0.6.16.post4 $GDN_FI_SITE_fi0616p4) \
  $(release 0.6.11 $GDN_FI_SITE_fi0611) $(release 0.6.10 $GDN_FI_SITE_fi0610) \
  --pytest --gdn-isolate -p no:warnings "${STANDIN[@]}" > $R/campaign.out 2>&1
echo "campaign exit $?" >> $R/campaign.out
pack
