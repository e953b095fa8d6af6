#!/usr/bin/env bash
# Build the bundle that lets the lent H200 (python3.12, torch 2.11+cu130, triton 3.6,
# cuda-bindings present, NO network) run FlashInfer's GDN decode/MTP AND prefill
# (chunk_gated_delta_rule, SM90 = CuTe DSL delta_rule_dsl/delta_rule_sm90.py) kernels and
# fla-core's Triton GDN kernels.  Adapted from shared/gpu/pack_gpu_deps.sh.
#
# Two modes:
#   bash scripts/pack_gpu_deps.sh [OUTDIR]        (default OUTDIR=.gpu; ~61.5 MiB)
#     ir.so.xz    nvidia-cutlass-dsl-libs-cu13 _cutlass_ir.cu13...so (193 MB raw), xz --x86 -9e
#     rt.so.xz    nvidia-cutlass-dsl-libs-cu13 libcute_dsl_runtime.so (43 MB raw)
#                 (both are REUSED when already present in OUTDIR; FORCE=1 rebuilds them)
#     site.tar.xz everything else: pruned flashinfer (closure of FI_STARTS, 4 stub __init__s),
#                 cutlass DSL python (libs-base + libs-core, no iket), tvm_ffi (no 3rdparty/src),
#                 fla-core, dist-info dirs.
#     gpu_env.sh  device side: `. .gpu/gpu_env.sh` (unpacks once to /tmp/site, sets PYTHONPATH);
#                 kept if present, else copied from shared/gpu.
#
#   SGL=0.5.23 bash scripts/pack_gpu_deps.sh .sgl: SGLang's kernel files (see below)
#
#   FI_OVERLAY=0.7.2.post1 bash scripts/pack_gpu_deps.sh .gpu-fi072
#     flashinfer<ver>.tar.xz  only the pruned flashinfer package of that release + its
#                             flashinfer_python-<ver>.dist-info/METADATA (same closure/stubs)
#     use.sh                  device side, after `. .gpu/gpu_env.sh`: builds /tmp/site-<tag>
#                             (= cp -al /tmp/site, flashinfer replaced) and exports
#                             GDN_FI_BASELINE_SITE=/tmp/site-<tag> and GDN_FI_BASELINE_PYTHONPATH
#                             (PYTHONPATH with /tmp/site -> /tmp/site-<tag>); PYTHONPATH unchanged.
#     Requires the release to accept nvidia-cutlass-dsl 4.8.1 / apache-tvm-ffi 0.1.15.post2
#     (checked against its METADATA below; the script stops otherwise).
#
# env WHEELDIR (default /tmp/gdn_wheels): where wheels are downloaded / reused from.
# env FORCE=1: recompress ir.so.xz / rt.so.xz even if present.
# env FAST=1: xz -6 instead of -9e for the big .so (quicker, ~8 MB bigger: no longer fits one call)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SHARED="${GPU_SHARED:-$HERE/../../shared/gpu}"     # gpu_env.sh and fi_closure.py
OUTDIR="${1:-.gpu}"
WHEELDIR="${WHEELDIR:-/tmp/gdn_wheels}"
FI_VERSION="${FI_VERSION:-0.7.4}"
FI_OVERLAY="${FI_OVERLAY:-}"
STAGE="$(mktemp -d /tmp/gdn_stage.XXXXXX)"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$WHEELDIR" "$OUTDIR"

# flashinfer pruning: start modules, skipped subtrees, packages whose __init__ becomes a stub.
#  - gdn_kernels.delta_rule_dsl: gdn_prefill gets chunk_gated_delta_rule_sm90 & co. through
#    the (stubbed) gdn_kernels/__init__, so the prefill kernels are an explicit start.
#  - skipped: Cake (nvcc, SM100 only), cuDNN linear attention (only reached on cc (10,0)),
#    experimental (sm120_cute backend), gdn_kernels.blackwell (SM100 prefill), green_ctx.
#  - cute_dsl/__init__ imports every CuTe-DSL kernel family: stubbed to its availability probes.
FI_STARTS=(flashinfer.gdn_decode flashinfer.gdn_prefill flashinfer.gdn_kernels.delta_rule_dsl)
FI_SKIP=(flashinfer.jit.cake_gdn flashinfer.green_ctx flashinfer.cudnn flashinfer.experimental
         flashinfer.gdn_kernels.blackwell)
FI_STUB=(flashinfer flashinfer.jit flashinfer.gdn_kernels flashinfer.cute_dsl)
# single files added WITHOUT following their function-level imports (module level needs only
# cutlass + cute_dsl.availability); FlashInfer's tests/gdn import is_cute_dsl_arch_supported from it
FI_EXTRA=(flashinfer/cute_dsl/utils.py)

pipdl() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$WHEELDIR" "$@"
}
whl() { ls "$WHEELDIR"/$1 | head -1; }

# prune_flashinfer VERSION SITE: pruned flashinfer package + dist-info METADATA into SITE
prune_flashinfer() {
  local ver="$1" site="$2" fi="$STAGE/fi-$1" w
  w="$(whl "flashinfer_python-${ver}-*.whl")"
  unzip -qo "$w" 'flashinfer/*' -x 'flashinfer/data/*' -d "$fi"
  python3 "$SHARED/fi_closure.py" "$fi" "${FI_STARTS[@]}" --skip "${FI_SKIP[@]}" \
    --stub "${FI_STUB[@]}" 2>"$STAGE/closure-$ver.err" | awk '{print $2}' > "$STAGE/fi-$ver.list"
  if grep MISSING "$STAGE/closure-$ver.err"; then
    echo "flashinfer $ver: unresolved intra-package imports (see above)" >&2; exit 1
  fi
  echo "flashinfer $ver closure: $(tail -1 "$STAGE/closure-$ver.err")"
  # whole gdn_kernels/*.py top level too (cheap; lets other GDN kernels be tried)
  (cd "$fi" && ls flashinfer/gdn_kernels/*.py "${FI_EXTRA[@]}") >> "$STAGE/fi-$ver.list"
  (cd "$fi" && sort -u "$STAGE/fi-$ver.list" | tar -cf - -T -) | tar -xf - -C "$site"
  cat > "$site/flashinfer/__init__.py" <<EOF
# pruned flashinfer ${ver} (GDN decode/MTP/prefill only); import flashinfer.gdn_decode /
# flashinfer.gdn_prefill directly.
from .version import __version__ as __version__
from .version import __git_version__ as __git_version__


def __getattr__(name):  # lazy top-level re-export kept from the real __init__
    if name == "chunk_gated_delta_rule":
        from .gdn_prefill import chunk_gated_delta_rule

        return chunk_gated_delta_rule
    raise AttributeError(f"pruned flashinfer has no attribute {name!r}")
EOF
  echo '# pruned: see flashinfer/__init__.py' > "$site/flashinfer/jit/__init__.py"
  cat > "$site/flashinfer/cute_dsl/__init__.py" <<'EOF'
# pruned: only the availability probes (the real __init__ imports every CuTe-DSL kernel family)
from .availability import *  # noqa: F401,F403
EOF
  cat > "$site/flashinfer/gdn_kernels/__init__.py" <<'EOF'
# pruned: import the kernel modules directly. The names the real __init__ exported are
# resolved lazily (PEP 562) with its fallback: None when the kernel module cannot be imported.
import importlib

_LAZY = {
    "gated_delta_rule": (".gdn_decode_bf16_state", "gated_delta_rule"),
    "gated_delta_rule_mtp": (".gdn_decode_bf16_state", "gated_delta_rule_mtp"),
    "gated_delta_rule_bf16state_cooprow": (".gdn_decode_bf16_state", "gated_delta_rule_bf16state_cooprow"),
    "gated_delta_rule_bf16state_cooprow_mtp": (".gdn_decode_bf16_state", "gated_delta_rule_bf16state_cooprow_mtp"),
    "run_pretranspose_decode": (".gdn_decode_pretranspose", "run_pretranspose_decode"),
    "run_nontranspose_decode": (".gdn_decode_nontranspose", "run_nontranspose_decode"),
    "run_mtp_decode": (".gdn_decode_mtp", "run_mtp_decode"),
    "get_tile_v_mtp": (".gdn_decode_mtp", "get_tile_v_mtp"),
    "get_vec_size_mtp": (".gdn_decode_mtp", "get_vec_size_mtp"),
    "get_mtp_config": (".gdn_decode_mtp", "get_mtp_config"),
    "chunk_gated_delta_rule_sm80": (".delta_rule_dsl", "chunk_gated_delta_rule_sm80"),
    "chunk_gated_delta_rule_sm90": (".delta_rule_dsl", "chunk_gated_delta_rule_sm90"),
    "chunk_gated_delta_rule_sm120": (".delta_rule_dsl", "chunk_gated_delta_rule_sm120"),
    "cp_delta_rule_dsl_sm80": (".delta_rule_dsl", "cp_delta_rule_dsl_sm80"),
    "cp_delta_rule_dsl_sm90": (".delta_rule_dsl", "cp_delta_rule_dsl_sm90"),
    "cp_delta_rule_dsl_sm120": (".delta_rule_dsl", "cp_delta_rule_dsl_sm120"),
    # SM100 prefill (gdn_kernels/blackwell) is not in the bundle -> None
    "chunk_gated_delta_rule_sm100": (".blackwell", "chunk_gated_delta_rule_sm100"),
    "cp_delta_rule_dsl_sm100": (".blackwell", "cp_delta_rule_dsl_sm100"),
    "_chunk_gated_delta_rule_gdn_cp_sm100": (".blackwell", "_chunk_gated_delta_rule_gdn_cp_sm100"),
}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    mod, attr = _LAZY[name]
    try:
        value = getattr(importlib.import_module(mod, __name__), attr, None)
    except (ImportError, RuntimeError):
        value = None
    globals()[name] = value
    return value
EOF
  unzip -qo "$w" "flashinfer_python-${ver}.dist-info/METADATA" -d "$site"
  find "$site" -name '__pycache__' -prune -exec rm -rf {} +
}

# ---------------------------------------------------------------- SGLang kernel files
# SGL=0.5.23 bash scripts/pack_gpu_deps.sh .sgl  ->  .sgl/sglang0523.tar.xz (~140 KB): the wheel's fla/ and linear/
# attention packages and its METADATA, all that fuzz/targets/sglang_loader.py loads (the wheel is 39 MB). Device side:
# `mkdir -p /tmp/sgl && tar -xJf .sgl/sglang0523.tar.xz -C /tmp/sgl` and /tmp/sgl on PYTHONPATH.
if [ -n "${SGL:-}" ]; then
  python3 -m pip download -q --no-deps -d "$WHEELDIR" "sglang==$SGL"
  unzip -qo "$(whl "sglang-${SGL}-*.whl")" 'sglang/__init__.py' 'sglang/kernels/ops/attention/__init__.py' \
    'sglang/kernels/ops/attention/fla/*' 'sglang/kernels/ops/attention/linear/*' \
    "sglang-${SGL}.dist-info/METADATA" -d "$STAGE/sgl"
  tar -C "$STAGE/sgl" -cJf "$OUTDIR/sglang$(echo "$SGL" | tr -d .).tar.xz" .
  ls -l "$OUTDIR"
  exit 0
fi

# ---------------------------------------------------------------- overlay mode
if [ -n "$FI_OVERLAY" ]; then
  pipdl "flashinfer-python==${FI_OVERLAY}"
  META="$(unzip -p "$(whl "flashinfer_python-${FI_OVERLAY}-*.whl")" "flashinfer_python-${FI_OVERLAY}.dist-info/METADATA")"
  echo "$META" | grep -E '^Requires-Dist: (nvidia-cutlass-dsl|apache-tvm-ffi)' | grep -v 'extra ==' || true
  python3 - "$META" <<'EOF'
import sys
from packaging.requirements import Requirement
have = {"nvidia-cutlass-dsl": "4.8.1", "apache-tvm-ffi": "0.1.15.post2"}
bad = []
for line in sys.argv[1].splitlines():
    if not line.startswith("Requires-Dist:"): continue
    r = Requirement(line.split(":", 1)[1].strip())
    if r.name in have and (r.marker is None) and not r.specifier.contains(have[r.name], prereleases=True):
        bad.append(f"{r} (bundle has {have[r.name]})")
if bad:
    sys.exit("pin mismatch: " + "; ".join(bad))
print("pins compatible with the .gpu bundle:", have)
EOF
  SITE="$STAGE/site"; mkdir -p "$SITE"
  prune_flashinfer "$FI_OVERLAY" "$SITE"
  TAG="fi$(echo "$FI_OVERLAY" | sed 's/\.post.*//; s/\.//g')"     # 0.7.2.post1 -> fi072
  TAR="flashinfer$(echo "$TAG" | sed 's/^fi//').tar.xz"            # flashinfer072.tar.xz
  tar -C "$SITE" -cf - . | xz -T1 -9e > "$OUTDIR/$TAR"
  sed "s#@TAG@#${TAG}#g; s#@TAR@#${TAR}#g; s#@VER@#${FI_OVERLAY}#g; s#@OUTDIR@#${OUTDIR}#g" \
    > "$OUTDIR/use.sh" <<'EOF'
# Device side, AFTER `. .gpu/gpu_env.sh` (which fills /tmp/site):  `. @OUTDIR@/use.sh`
# Builds /tmp/site-@TAG@ = hard-linked copy (cp -al) of /tmp/site whose flashinfer package and
# flashinfer_python-*.dist-info are FlashInfer @VER@'s (pruned, same stub __init__s).
# PYTHONPATH is left alone (= candidate, /tmp/site). Exports for the baseline process:
#   GDN_FI_BASELINE_SITE=/tmp/site-@TAG@
#   GDN_FI_BASELINE_PYTHONPATH=$PYTHONPATH with every /tmp/site entry moved to /tmp/site-@TAG@
# e.g.  PYTHONPATH=$GDN_FI_BASELINE_PYTHONPATH python3 ...   (baseline = @VER@)
_O=${GDN_FI_OVERLAY_DIR:-@OUTDIR@}; _B=/tmp/site-@TAG@
_s=$(cd /tmp/site 2>/dev/null && ls -d .site.tar.xz.*.ok 2>/dev/null | head -1)
if [ -z "$_s" ] || [ ! -d /tmp/site/flashinfer ]; then
  echo "use.sh: run '. .gpu/gpu_env.sh' first" >&2
else
  _f=$_B/.@TAR@.$(stat -c %s $_O/@TAR@).${_s#.}   # redone when either archive changes
  if [ ! -f "$_f" ]; then
    rm -rf $_B && cp -al /tmp/site $_B && rm -f $_B/.*.ok
    rm -rf $_B/flashinfer $_B/flashinfer_python-*.dist-info
    tar -xJf $_O/@TAR@ -C $_B && touch "$_f"
  fi
  export GDN_FI_BASELINE_SITE=$_B
  export GDN_FI_BASELINE_PYTHONPATH=$(printf %s "$PYTHONPATH" | sed "s#/tmp/site\(/\|:\|\$\)#$_B\1#g")
  echo "use.sh: $_B = flashinfer $(sed -n 's/^Version: //p' $_B/flashinfer_python-*.dist-info/METADATA)"
fi
EOF
  ls -l "$OUTDIR"; du -cb "$OUTDIR"/* | tail -1
  exit 0
fi

# ---------------------------------------------------------------- full bundle
PKGS=(
  flashinfer-python==${FI_VERSION}
  nvidia-cutlass-dsl==4.8.1
  nvidia-cutlass-dsl-libs-base==4.8.1
  nvidia-cutlass-dsl-libs-core==4.8.1
  nvidia-cutlass-dsl-libs-cu13==4.8.1
  apache-tvm-ffi==0.1.15.post2
  fla-core==0.6.0
)
# 1. wheels (cp312 / manylinux x86_64, no deps: everything else is on the device image)
pipdl "${PKGS[@]}"

SITE="$STAGE/site"; mkdir -p "$SITE"
# 2. cutlass DSL: python parts + metadata; the two big .so are shipped separately
for w in 'nvidia_cutlass_dsl-4.8.1-*.whl' 'nvidia_cutlass_dsl_libs_base-4.8.1-*.whl' \
         'nvidia_cutlass_dsl_libs_core-4.8.1-*.whl'; do
  unzip -qo "$(whl "$w")" -d "$SITE"
done
CU13="$(whl 'nvidia_cutlass_dsl_libs_cu13-4.8.1-*.whl')"
IRSO=nvidia_cutlass_dsl/dsl_packages/cutlass/_mlir/_mlir_libs/_cutlass_ir.cu13.cpython-312-x86_64-linux-gnu.so
RTSO=nvidia_cutlass_dsl/cu13/lib/libcute_dsl_runtime.so
NEED_SO=0
{ [ "${FORCE:-0}" = 1 ] || [ ! -s "$OUTDIR/ir.so.xz" ] || [ ! -s "$OUTDIR/rt.so.xz" ]; } && NEED_SO=1
if [ "$NEED_SO" = 1 ]; then
  unzip -qo "$CU13" -d "$STAGE/cu13"
else   # only the small files of the cu13 wheel
  unzip -qo "$CU13" 'nvidia_cutlass_dsl_libs_cu13-4.8.1.dist-info/*' \
    'nvidia_cutlass_dsl/dsl_packages/cutlass/_mlir/_mlir_libs/_cutlass_ir_version_cu13.py' -d "$STAGE/cu13"
fi
mkdir -p "$SITE/nvidia_cutlass_dsl/cu13/lib"
cp -r "$STAGE/cu13/nvidia_cutlass_dsl_libs_cu13-4.8.1.dist-info" "$SITE/"
cp "$STAGE/cu13/nvidia_cutlass_dsl/dsl_packages/cutlass/_mlir/_mlir_libs/_cutlass_ir_version_cu13.py" \
   "$SITE/nvidia_cutlass_dsl/dsl_packages/cutlass/_mlir/_mlir_libs/"
# not needed for JIT use: the iket profiler package (6.6 MB of .so)
rm -rf "$SITE/nvidia_cutlass_dsl/dsl_packages/iket"

# 3. tvm_ffi without its C++ sources / 3rdparty (core imports lib/libtvm_ffi_testing.so: keep it)
unzip -qo "$(whl 'apache_tvm_ffi-0.1.15.post2-*.whl')" -d "$SITE"
rm -rf "$SITE/tvm_ffi/3rdparty" "$SITE/tvm_ffi/src"

# 4. fla-core (pure python / triton)
unzip -qo "$(whl 'fla_core-0.6.0-*.whl')" -d "$SITE"

# 5. flashinfer: closure of FI_STARTS (~60 files, 2.2 MB raw for 0.7.4)
prune_flashinfer "$FI_VERSION" "$SITE"

find "$SITE" -name '__pycache__' -prune -exec rm -rf {} +
# 6. compress
tar -C "$SITE" -cf - . | xz -T1 -9e > "$OUTDIR/site.tar.xz"
LEVEL="preset=9e"; [ "${FAST:-0}" = 1 ] && LEVEL="preset=6"
# the two big .so: skipped when already there (FORCE=1 redoes them); ~7 min at -9e
if [ "${FORCE:-0}" = 1 ] || [ ! -s "$OUTDIR/ir.so.xz" ]; then
  xz -T1 --x86 --lzma2=$LEVEL,dict=192MiB -c "$STAGE/cu13/$IRSO" > "$OUTDIR/ir.so.xz.tmp" && mv "$OUTDIR/ir.so.xz.tmp" "$OUTDIR/ir.so.xz" &
fi
if [ "${FORCE:-0}" = 1 ] || [ ! -s "$OUTDIR/rt.so.xz" ]; then
  xz -T1 --x86 --lzma2=$LEVEL,dict=64MiB -c "$STAGE/cu13/$RTSO" > "$OUTDIR/rt.so.xz.tmp" && mv "$OUTDIR/rt.so.xz.tmp" "$OUTDIR/rt.so.xz" &
fi
wait
[ -s "$OUTDIR/gpu_env.sh" ] || cp "$SHARED/gpu_env.sh" "$OUTDIR/gpu_env.sh"
ls -l "$OUTDIR"; du -cb "$OUTDIR"/* | tail -1
