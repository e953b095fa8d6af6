# Part of H200 call 2 (2026-12-03c): the corpus entry flashinfer-mtp-fp32-decode-NonFinite-0 passed on 0.7.2.post1 in
# call 1's gate (XPASS(strict): its range ">=0.6.10,<0.7.4" claims the NaN there). Probe its case, as decode and as
# verify (T = 2, 4), on the MTP and bf16 targets, on each release that the known bug's record names.
C='decode-B3-T1-H1-HV2-K128-V128-pool3-pad0-fp32state-bf16in-i32-vk-gate_saturated-seed0-slots[0,1,2]'
probe_on() {  # $1 release tag; the rest: probe arguments
  local tag=$1; shift
  if [ "${DRY:-0}" = 1 ]; then set -- "$@" --module flashinfer=$STANDIN; PP=$PYTHONPATH
  elif [ $tag = fi074 ]; then PP=$PYTHONPATH; else eval PP=\$GDN_FI_PYTHONPATH_$tag:$PWD; fi
  echo "== $tag"; PYTHONPATH=$PP timeout 120 $PY -m fuzz probe "$@"; echo "exit $?"
}
for tag in fi0610 fi0616p4 fi072p1 fi074; do
  probe_on $tag "$C" --target flashinfer-mtp-fp32
  probe_on $tag "$C" "${C/fp32state/bf16state}" --target flashinfer-mtp-fp32 --target flashinfer-bf16 --grid T=1,2,4
done > $R/probe.out 2>&1
