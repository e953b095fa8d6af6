#!/usr/bin/env bash
# Build the bundle that lets the lent H200 (python3.12, torch 2.11+cu130, triton 3.6,
# cuda-bindings present, NO network) run FlashInfer's GDN decode/MTP AND prefill
# (chunk_gated_delta_rule, SM90 = CuTe DSL delta_rule_dsl/delta_rule_sm90.py) kernels and
# fla-core's Triton GDN kernels.  Adapted from shared/gpu/pack_gpu_deps.sh.
#
# Modes:
#   bash scripts/pack_gpu_deps.sh [OUTDIR]        (default OUTDIR=.gpu; ~61.5 MiB)
#     ir.so.xz    nvidia-cutlass-dsl-libs-cu13 _cutlass_ir.cu13...so (193 MB raw), xz --x86 -9e
#     rt.so.xz    nvidia-cutlass-dsl-libs-cu13 libcute_dsl_runtime.so (43 MB raw)
#                 (both are REUSED when already present in OUTDIR; FORCE=1 rebuilds them)
#     site.tar.xz everything else: pruned flashinfer (closure of its start modules, 4 stub __init__s),
#                 cutlass DSL python (libs-base + libs-core, no iket), tvm_ffi (no 3rdparty/src),
#                 fla-core, dist-info dirs.
#     gpu_env.sh  device side: `. .gpu/gpu_env.sh` (unpacks once to /tmp/site, sets PYTHONPATH);
#                 kept if present, else copied from shared/gpu.
#
#   SGL=0.5.23 bash scripts/pack_gpu_deps.sh .sgl: SGLang's GDN glue + Triton kernels, import closure (see below)
#   VLLM=0.34.0 bash scripts/pack_gpu_deps.sh .vllm: vLLM's flash_linear_attention/ops kernel files (see below)
#
#   FI_OVERLAY=0.7.2.post1 bash scripts/pack_gpu_deps.sh .gpu-fi072
#     flashinfer<ver>.tar.xz  only the pruned flashinfer package of that release + its
#                             flashinfer_python-<ver>.dist-info/METADATA (same closure/stubs)
#     use.sh                  device side, after `. .gpu/gpu_env.sh`: builds /tmp/site-<tag>
#                             (= cp -al /tmp/site, flashinfer replaced) and exports
#                             GDN_FI_BASELINE_SITE=/tmp/site-<tag> and GDN_FI_BASELINE_PYTHONPATH
#                             (PYTHONPATH with /tmp/site -> /tmp/site-<tag>); PYTHONPATH unchanged.
#
#   FI_OVERLAYS="0.6.10 0.6.11 0.6.16.post4 0.7.2.post1" bash scripts/pack_gpu_deps.sh .gpu-fi
#     flashinfer-overlays.tar.xz  ONE xz -9e archive holding every release's pruned tree under <tag>/
#                             (tags: fi0610, fi0611, fi0616p4, fi072p1); the files are ordered by
#                             their path inside the tree, so one file's releases sit side by side and
#                             xz stores what they share once (a device call carries 64 MiB in all:
#                             .gpu and the repo leave about 1.7 MB for this)
#     use.sh                  device side, after `. .gpu/gpu_env.sh`: unpacks the archive once, builds
#                             /tmp/site-<tag> per release (cp -al /tmp/site, flashinfer replaced) and
#                             exports GDN_FI_TAGS="<tag> ...", and per tag GDN_FI_SITE_<tag>,
#                             GDN_FI_VERSION_<tag> and GDN_FI_PYTHONPATH_<tag> (PYTHONPATH with
#                             /tmp/site -> /tmp/site-<tag>); PYTHONPATH itself is left alone, e.g.
#                             PYTHONPATH=$GDN_FI_PYTHONPATH_fi0610 python3 -m pytest fuzz/ -k flashinfer
#
#   Both overlay modes require each release to accept nvidia-cutlass-dsl 4.8.1 / apache-tvm-ffi
#   0.1.15.post2 (checked against its METADATA; the script stops otherwise).
#
# Per release, prune_flashinfer derives the pruning from the wheel itself (docs/research/
# flashinfer-releases.md §8.3):
#   * start modules: gdn_decode and gdn_prefill, plus gdn_kernels.delta_rule_dsl (0.6.14+) and
#     cute_dsl.availability (0.6.18+) where the wheel has them;
#   * the gdn_kernels/__init__ stub: every name the release's real __init__ exports, resolved lazily
#     from the module the real one imports it from, with the real except branch's fallback (None; False
#     for 0.6.8-0.6.13's _has_blackwell_prefill, which gdn_prefill imports) and exception types;
#   * the cute_dsl/__init__ stub: `from .availability import *` where availability.py exists, empty
#     before 0.6.18 (0.6.12-0.6.13's bf16 kernels import flashinfer.cute_dsl.* modules, which would
#     fail on the missing availability module and turn _GDN_DECODE_BF16_STATE_AVAILABLE off);
#   * 0.6.5-0.6.13's SM90 prefill is CUDA C++ built by nvcc from flashinfer/data, which is not packed:
#     the prefill target reports itself unavailable there (its Python closure is packed all the same).
# Each pruned tree is then checked statically: fi_closure.py run again on the PRUNED tree (stubs as
# written) from gdn_decode and gdn_prefill must resolve every intra-package import (no MISSING), and
# every module the gdn_kernels stub names must be packed or in a skipped subtree; else the script stops.
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
FI_OVERLAYS="${FI_OVERLAYS:-}"
STAGE="$(mktemp -d /tmp/gdn_stage.XXXXXX)"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$WHEELDIR" "$OUTDIR"

# flashinfer pruning: skipped subtrees, packages whose __init__ becomes a stub (start modules: per
# release, see prune_flashinfer).
#  - gdn_kernels.delta_rule_dsl (0.6.14+): gdn_prefill gets chunk_gated_delta_rule_sm90 & co. through
#    the (stubbed) gdn_kernels/__init__, so the prefill kernels are an explicit start.
#  - skipped: Cake (nvcc, SM100 only), cuDNN linear attention (only reached on cc (10,0)),
#    experimental (sm120_cute backend), gdn_kernels.blackwell (SM100 prefill; 0.6.8+), green_ctx.
#    (0.6.7's gdn_kernels.blackwell_prefill is imported unguarded by its gdn_prefill: not skipped.)
#  - cute_dsl/__init__ imports every CuTe-DSL kernel family: stubbed (see above).
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

# gen_stub.py REAL_INIT > STUB: the lazy gdn_kernels/__init__ of one release, from its real __init__
cat > "$STAGE/gen_stub.py" <<'EOF'
import ast
import sys

tree = ast.parse(open(sys.argv[1]).read())
lazy = {}  # name -> (modules that must import, attribute or None, value when they do, fallback, caught)


def constant(node):
    try:
        return repr(ast.literal_eval(node))
    except ValueError:
        return None


def assigned(stmts):
    out = {}
    for st in stmts:
        targets = st.targets if isinstance(st, ast.Assign) else [st.target] if isinstance(st, ast.AnnAssign) else []
        value = getattr(st, "value", None)
        for t in targets:
            if isinstance(t, ast.Name) and value is not None and constant(value) is not None:
                out[t.id] = constant(value)
    return out


for node in tree.body:
    if isinstance(node, ast.ImportFrom) and node.level == 1:  # unguarded in the real __init__
        for a in node.names:
            lazy[a.asname or a.name] = ((node.module,), a.name, "None", "None", "()")
    elif isinstance(node, ast.Try):
        mods, names, fallback, caught = [], {}, {}, []
        for st in node.body:
            if isinstance(st, ast.ImportFrom) and st.level == 1:
                mods.append(st.module)
                for a in st.names:
                    names[a.asname or a.name] = (st.module, a.name)
        for h in node.handlers:
            fallback.update(assigned(h.body))
            types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type] if h.type is not None else []
            caught += [t.id for t in types if isinstance(t, ast.Name)] or ["Exception"]
        exc = "(" + "".join(c + ", " for c in dict.fromkeys(caught)) + ")"
        for name, (mod, attr) in names.items():
            lazy[name] = ((mod,), attr, "None", fallback.get(name, "None"), exc)
        for name, value in assigned(node.body).items():  # e.g. _has_cute_dsl = True after the imports
            lazy[name] = (tuple(mods), None, value, fallback.get(name, "None"), exc)

out = [
    "# pruned: import the kernel modules directly. The names this release's real __init__ exports resolve",
    "# lazily (PEP 562) from the module the real one imports them from, with the real except branch's",
    "# fallback and exception types (generated by scripts/pack_gpu_deps.sh from the release's own __init__).",
    "import importlib",
    "",
    "_LAZY = {",
]
for name, (mods, attr, ok, fallback, exc) in lazy.items():
    out.append(f"    {name!r}: ({tuple('.' + m for m in mods)!r}, {attr!r}, {ok}, {fallback}, {exc}),")
out += [
    "}",
    "",
    "",
    "def __getattr__(name):",
    "    if name not in _LAZY:",
    "        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')",
    "    mods, attr, ok, fallback, caught = _LAZY[name]",
    "    try:",
    "        loaded = [importlib.import_module(m, __name__) for m in mods]",
    "        if attr is not None and not hasattr(loaded[0], attr):  # as `from .m import attr` would",
    "            raise ImportError(f'cannot import name {attr!r} from {loaded[0].__name__!r}')",
    "        value = ok if attr is None else getattr(loaded[0], attr)",
    "    except caught:",
    "        value = fallback",
    "    globals()[name] = value",
    "    return value",
]
print("\n".join(out))
EOF

# check_stub.py SITE SKIP...: every module the gdn_kernels stub names is packed or skipped
cat > "$STAGE/check_stub.py" <<'EOF'
import ast
import sys
from pathlib import Path

site, skip = Path(sys.argv[1]), sys.argv[2:]
tree = ast.parse((site / "flashinfer/gdn_kernels/__init__.py").read_text())
table = next(n.value for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "_LAZY")
lazy = {ast.literal_eval(k): ast.literal_eval(v.elts[0]) for k, v in zip(table.keys, table.values)}  # name -> modules
bad = []
for name, mods in lazy.items():
    for m in mods:
        full = "flashinfer.gdn_kernels" + m
        base = site.joinpath(*full.split("."))
        packed = base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()
        if not packed and not any(full == s or full.startswith(s + ".") for s in skip):
            bad.append(f"{name} <- {full}")
if bad:
    sys.exit("the gdn_kernels stub names modules that are neither packed nor skipped: " + "; ".join(bad))
print(f"{len(lazy)} stub names")
EOF

# check_pruned_tree VERSION SITE: the pruned tree resolves its own closure statically, stubs as written
check_pruned_tree() {
  local ver="$1" site="$2" names
  python3 "$SHARED/fi_closure.py" "$site" flashinfer.gdn_decode flashinfer.gdn_prefill \
    --skip "${FI_SKIP[@]}" >/dev/null 2>"$STAGE/recheck-$ver.err"
  if grep MISSING "$STAGE/recheck-$ver.err"; then
    echo "flashinfer $ver: the pruned tree does not resolve its own imports (see above)" >&2; exit 1
  fi
  names="$(python3 "$STAGE/check_stub.py" "$site" "${FI_SKIP[@]}")"
  echo "flashinfer $ver pruned tree: closure resolves statically ($(tail -1 "$STAGE/recheck-$ver.err")), $names"
}

# prune_flashinfer VERSION SITE: pruned flashinfer package + dist-info METADATA into SITE
prune_flashinfer() {
  local ver="$1" site="$2" fi="$STAGE/fi-$1" w f starts extra
  w="$(whl "flashinfer_python-${ver}-*.whl")"
  unzip -qo "$w" 'flashinfer/*' -x 'flashinfer/data/*' -d "$fi"
  starts=(flashinfer.gdn_decode flashinfer.gdn_prefill)   # every release has both
  [ -d "$fi/flashinfer/gdn_kernels/delta_rule_dsl" ] && starts+=(flashinfer.gdn_kernels.delta_rule_dsl)
  [ -f "$fi/flashinfer/cute_dsl/availability.py" ] && starts+=(flashinfer.cute_dsl.availability)
  python3 "$SHARED/fi_closure.py" "$fi" "${starts[@]}" --skip "${FI_SKIP[@]}" \
    --stub "${FI_STUB[@]}" 2>"$STAGE/closure-$ver.err" | awk '{print $2}' > "$STAGE/fi-$ver.list"
  if grep MISSING "$STAGE/closure-$ver.err"; then
    echo "flashinfer $ver: unresolved intra-package imports (see above)" >&2; exit 1
  fi
  echo "flashinfer $ver closure: $(tail -1 "$STAGE/closure-$ver.err") (starts: ${starts[*]})"
  # whole gdn_kernels/*.py top level too (cheap; lets other GDN kernels be tried)
  extra=()
  for f in "${FI_EXTRA[@]}"; do [ -f "$fi/$f" ] && extra+=("$f"); done
  (cd "$fi" && ls flashinfer/gdn_kernels/*.py "${extra[@]}") >> "$STAGE/fi-$ver.list"
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
  mkdir -p "$site/flashinfer/cute_dsl"
  if [ -f "$fi/flashinfer/cute_dsl/availability.py" ]; then
    cat > "$site/flashinfer/cute_dsl/__init__.py" <<'EOF'
# pruned: only the availability probes (the real __init__ imports every CuTe-DSL kernel family)
from .availability import *  # noqa: F401,F403
EOF
  else
    echo "# pruned: empty (the real __init__ imports every CuTe-DSL kernel family; ${ver} has no availability.py)" \
      > "$site/flashinfer/cute_dsl/__init__.py"
  fi
  python3 "$STAGE/gen_stub.py" "$fi/flashinfer/gdn_kernels/__init__.py" > "$site/flashinfer/gdn_kernels/__init__.py"
  unzip -qo "$w" "flashinfer_python-${ver}.dist-info/METADATA" -d "$site"
  find "$site" -name '__pycache__' -prune -exec rm -rf {} +
  check_pruned_tree "$ver" "$site"
}

# check_pins VERSION: the release accepts the .gpu bundle's cutlass-dsl and tvm-ffi (its METADATA)
check_pins() {
  local meta
  meta="$(unzip -p "$(whl "flashinfer_python-$1-*.whl")" "flashinfer_python-$1.dist-info/METADATA")"
  echo "$meta" | grep -E '^Requires-Dist: (nvidia-cutlass-dsl|apache-tvm-ffi)' | grep -v 'extra ==' || true
  python3 - "$meta" "$1" <<'EOF'
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
    sys.exit(f"flashinfer {sys.argv[2]}: pin mismatch: " + "; ".join(bad))
print(f"flashinfer {sys.argv[2]}: pins compatible with the .gpu bundle:", have)
EOF
}

# tag_of VERSION: 0.6.10 -> fi0610, 0.6.16.post4 -> fi0616p4, 0.7.2.post1 -> fi072p1
tag_of() { echo "fi$(echo "$1" | sed 's/\.post/p/; s/\.//g')"; }

# ---------------------------------------------------------------- serving-engine kernel files (pure Python)
# pack_py_tree NAME VERSION SRC OUT.tar.xz FILE...: FILE... (paths relative to SRC) plus an empty stub __init__.py for every
# package directory on their way that the list lacks, plus a minimal NAME-VERSION.dist-info/METADATA (what
# importlib.metadata.version reads), as one xz -9e archive.
pack_py_tree() {
  local name="$1" ver="$2" src="$3" out="$4" t="$STAGE/tree-$1" f d
  shift 4
  rm -rf "$t" && mkdir -p "$t"
  (cd "$src" && printf '%s\n' "$@" | sort -u | tar -cf - -T -) | tar -xf - -C "$t"
  for f in "$@"; do
    d="$(dirname "$f")"
    while [ "$d" != . ]; do
      [ -f "$t/$d/__init__.py" ] || printf '# %s %s device bundle: stub (the real __init__ imports the serving stack)\n' \
        "$name" "$ver" > "$t/$d/__init__.py"
      d="$(dirname "$d")"
    done
  done
  mkdir -p "$t/$name-$ver.dist-info"
  printf 'Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: gdn-fuzz device bundle: %s kernel files only\n' \
    "$name" "$ver" "$name" > "$t/$name-$ver.dist-info/METADATA"
  printf 'gdn-fuzz\n' > "$t/$name-$ver.dist-info/INSTALLER"
  (cd "$t" && find . -type f | LC_ALL=C sort | tar -cf - --no-recursion -T -) | xz -T1 -9e > "$out"
  echo "$name $ver: $(find "$t" -name '*.py' | wc -l) .py files, $(du -sb "$t" | cut -f1) B raw -> $(stat -c %s "$out") B $out"
}

# write_py_use_sh OUTDIR TAR VAR VERSION: OUTDIR/use.sh unpacks TAR once per warm machine into /tmp/<tar name without
# .tar.xz>, puts it first on PYTHONPATH and exports GDN_<VAR>_SITE and GDN_<VAR>_VERSION
write_py_use_sh() {
  local dir="/tmp/${2%.tar.xz}"
  sed "s#@OUTDIR@#$1#g; s#@TAR@#$2#g; s#@VAR@#$3#g; s#@VER@#$4#g; s#@DIR@#$dir#g" > "$1/use.sh" <<'EOF'
# Device side, from the repository root (carry: ["@OUTDIR@"]):  `. @OUTDIR@/use.sh`  (needs nothing else first)
# Unpacks @TAR@ once per warm machine into @DIR@ (redone when the archive changes) and exports
#   GDN_@VAR@_SITE=@DIR@   (holds the pruned package and its dist-info; first on PYTHONPATH, so that
#                           importlib.util.find_spec and importlib.metadata.version find it)
#   GDN_@VAR@_VERSION=@VER@
_O=${GDN_@VAR@_BUNDLE_DIR:-@OUTDIR@}; _U=@DIR@
if [ ! -f $_O/@TAR@ ]; then
  echo "use.sh: $_O/@TAR@ missing (carry @OUTDIR@)" >&2
else
  _m=$_U/.@TAR@.$(stat -c %s $_O/@TAR@).ok
  if [ ! -f $_m ]; then rm -rf $_U && mkdir -p $_U && tar -xJf $_O/@TAR@ -C $_U && touch $_m; fi
  export GDN_@VAR@_SITE=$_U GDN_@VAR@_VERSION=@VER@
  case ":${PYTHONPATH:-}:" in *":$_U:"*) ;; *) export PYTHONPATH=$_U${PYTHONPATH:+:$PYTHONPATH} ;; esac
  echo "use.sh: GDN_@VAR@_SITE=$_U ($(find $_U -name '*.py' | wc -l) .py files, version @VER@)"
fi
EOF
}

# SGL=0.5.23 bash scripts/pack_gpu_deps.sh .sgl  ->  .sgl/sglang-0.5.23.tar.xz (~60 KB) + .sgl/use.sh
#   The static import closure (scripts/py_closure.py: module-level imports, guarded ones included, TYPE_CHECKING
#   skipped) of SGLang's GDN glue (srt/layers/attention/linear/kernels/{gdn_flashinfer,gdn_triton,kernel_backend}),
#   its Triton kernels (kernels/ops/attention/{fla,linear}: chunk, fused_recurrent, l2norm, fused_sigmoid_gating_
#   recurrent, fused_recurrent_linear_replayssm, fused_gdn_gating) and the MTP commit kernel (kernels/ops/mamba/
#   mamba_state_scatter_triton). Not packed, stubbed by the loader instead: sglang.srt.utils (+ .common),
#   sglang.srt.runtime_context, sglang.kernels.jit.utils, and every package __init__ (packed as empty stubs).
#   The script stops when the closure names an SGLang module that does not exist.
#   SGL_EXTRA=1: also every top-level .py of fla/ and linear/ (not followed; ~+30 KB).
#   Source: SGL_SITE=<site-packages holding sglang==$SGL> (e.g. the project's .venv), else the wheel (39 MB, pip).
#   Device side: `. .sgl/use.sh` -> GDN_SGLANG_SITE=/tmp/sglang-$SGL on PYTHONPATH, GDN_SGLANG_VERSION.
SGL_STARTS=(
  sglang.srt.layers.attention.linear.kernels.gdn_flashinfer
  sglang.srt.layers.attention.linear.kernels.gdn_triton
  sglang.srt.layers.attention.linear.kernels.kernel_backend
  sglang.kernels.ops.attention.fla.chunk
  sglang.kernels.ops.attention.fla.l2norm
  sglang.kernels.ops.attention.fla.fused_recurrent
  sglang.kernels.ops.attention.linear.fused_sigmoid_gating_recurrent
  sglang.kernels.ops.attention.linear.fused_recurrent_linear_replayssm
  sglang.kernels.ops.attention.linear.fused_gdn_gating
  sglang.kernels.ops.mamba.mamba_state_scatter_triton
)
SGL_STUBS=(sglang.srt.utils sglang.srt.runtime_context sglang.kernels.jit.utils)
if [ -n "${SGL:-}" ]; then
  if [ -n "${SGL_SITE:-}" ]; then
    SRC="$SGL_SITE"
    have="$(sed -n 's/^Version: //p' "$SRC/sglang-$SGL.dist-info/METADATA" 2>/dev/null || true)"
    [ "$have" = "$SGL" ] || { echo "SGL_SITE=$SRC does not hold sglang $SGL (found '${have}')" >&2; exit 1; }
  else
    [ -n "$(ls "$WHEELDIR"/sglang-"$SGL"-*.whl 2>/dev/null)" ] || python3 -m pip download -q --no-deps -d "$WHEELDIR" "sglang==$SGL"
    SRC="$STAGE/sgl-src"; unzip -qo "$(whl "sglang-${SGL}-*.whl")" 'sglang/*.py' -d "$SRC"
  fi
  python3 "$HERE/py_closure.py" "$SRC" "${SGL_STARTS[@]}" --stub "${SGL_STUBS[@]}" \
    2>"$STAGE/sgl.err" | awk '{print $2}' > "$STAGE/sgl.list"
  if grep MISSING "$STAGE/sgl.err"; then echo "sglang $SGL: the closure names missing modules (above)" >&2; exit 1; fi
  grep -E '^(STUB|LAZY)' "$STAGE/sgl.err" || true
  echo "sglang $SGL closure: $(tail -1 "$STAGE/sgl.err"); third-party: $(sed -n 's/^EXTERNAL \([^ ]*\).*/\1/p' "$STAGE/sgl.err" | tr '\n' ' ')"
  [ "${SGL_EXTRA:-0}" = 1 ] && (cd "$SRC" && ls sglang/kernels/ops/attention/fla/*.py sglang/kernels/ops/attention/linear/*.py) >> "$STAGE/sgl.list"
  TAR="sglang-$SGL.tar.xz"
  # mapfile: the list, one path a line
  mapfile -t FILES < <(sort -u "$STAGE/sgl.list")
  pack_py_tree sglang "$SGL" "$SRC" "$OUTDIR/$TAR" "${FILES[@]}"
  write_py_use_sh "$OUTDIR" "$TAR" SGLANG "$SGL"
  ls -l "$OUTDIR"; du -cb "$OUTDIR"/* | tail -1
  exit 0
fi

# VLLM=0.34.0 bash scripts/pack_gpu_deps.sh .vllm  ->  .vllm/vllm-0.34.0.tar.xz (~75 KB) + .vllm/use.sh
#   vllm/third_party/flash_linear_attention/ops/*.py (the spec-decode GDN Triton kernels, ops/__init__ included), the
#   two real (empty / comment-only) __init__s above them, and the static import closure (scripts/py_closure.py) of the
#   kernel files fuzz.targets.vllm_loader imports (VLLM_STARTS): the vLLM modules those import that the loader does not
#   stub (vllm.envs, vllm.utils.math_utils, vllm.model_executor.warmup.jit_warmup{,_triton_helper}); vllm/__init__.py
#   and the other package __init__s are empty stubs. The modules the loader stubs (VLLM_STUBS) are not packed: printed
#   as STUB. The other ops files are packed without their closure (scripts/vllm_bundle_check.py (b) stubs what they
#   need beyond it). The script stops when the closure names a vLLM module that does not exist.
#   Source: the wheel (239 MB) from WHEELDIR or VLLM_WHEEL=<path>, else pip download.
#   Device side: `. .vllm/use.sh` -> GDN_VLLM_SITE=/tmp/vllm-$VLLM on PYTHONPATH, GDN_VLLM_VERSION.
VLLM_OPS=vllm.third_party.flash_linear_attention.ops
VLLM_STARTS=($VLLM_OPS.op $VLLM_OPS.fused_recurrent $VLLM_OPS.fused_sigmoid_gating $VLLM_OPS.fused_gdn_decode_post_conv_mtp
             $VLLM_OPS.layernorm_guard)
VLLM_STUBS=(vllm.triton_utils vllm.platforms vllm.utils.platform_utils)
if [ -n "${VLLM:-}" ]; then
  W="${VLLM_WHEEL:-}"
  if [ -z "$W" ]; then
    [ -n "$(ls "$WHEELDIR"/vllm-"$VLLM"-*.whl 2>/dev/null)" ] || python3 -m pip download -q --no-deps -d "$WHEELDIR" "vllm==$VLLM"
    W="$(whl "vllm-${VLLM}-*.whl")"
  fi
  SRC="$STAGE/vllm-src"; FLA=vllm/third_party/flash_linear_attention
  unzip -qo "$W" 'vllm/*.py' -d "$SRC"
  python3 "$HERE/py_closure.py" "$SRC" "${VLLM_STARTS[@]}" --stub "${VLLM_STUBS[@]}" \
    2>"$STAGE/vllm.err" | awk '{print $2}' > "$STAGE/vllm.list"
  if grep MISSING "$STAGE/vllm.err"; then echo "vllm $VLLM: the loader's closure names missing modules (above)" >&2; exit 1; fi
  grep -E '^(STUB|LAZY)' "$STAGE/vllm.err" || true
  echo "vllm $VLLM loader closure: $(tail -1 "$STAGE/vllm.err"); third-party: $(sed -n 's/^EXTERNAL \([^ ]*\).*/\1/p' "$STAGE/vllm.err" | tr '\n' ' ')"
  (cd "$SRC" && ls vllm/third_party/__init__.py $FLA/__init__.py $FLA/ops/*.py) >> "$STAGE/vllm.list"
  mapfile -t FILES < <(sort -u "$STAGE/vllm.list")
  TAR="vllm-$VLLM.tar.xz"
  pack_py_tree vllm "$VLLM" "$SRC" "$OUTDIR/$TAR" "${FILES[@]}"
  write_py_use_sh "$OUTDIR" "$TAR" VLLM "$VLLM"
  ls -l "$OUTDIR"; du -cb "$OUTDIR"/* | tail -1
  exit 0
fi

# ---------------------------------------------------------------- overlay mode: one release
if [ -n "$FI_OVERLAY" ]; then
  pipdl "flashinfer-python==${FI_OVERLAY}"
  check_pins "$FI_OVERLAY"
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

# ---------------------------------------------------------------- overlay mode: several releases, one archive
if [ -n "$FI_OVERLAYS" ]; then
  read -r -a VERS <<< "$FI_OVERLAYS"
  TREES="$STAGE/trees"; mkdir -p "$TREES"; TAGS=()
  for ver in "${VERS[@]}"; do
    [ -n "$(ls "$WHEELDIR"/flashinfer_python-"$ver"-*.whl 2>/dev/null)" ] || pipdl "flashinfer-python==${ver}"
    check_pins "$ver"
    tag="$(tag_of "$ver")"; TAGS+=("$tag")
    mkdir -p "$TREES/$tag"
    prune_flashinfer "$ver" "$TREES/$tag"
    echo "$ver" > "$TREES/$tag/.version"
  done
  TAR=flashinfer-overlays.tar.xz
  # One tar, files ordered by their path inside a release tree, then by release: the copies of one file
  # from every release are neighbours, which xz -9e (64 MiB dictionary) stores nearly once.
  (cd "$TREES" && find . -type f | sed 's#^\./##' | awk '{ i = index($0, "/"); print substr($0, i + 1) "\t" $0 }' \
     | LC_ALL=C sort | cut -f2 | tar -cf - --no-recursion -T -) | xz -T1 -9e > "$OUTDIR/$TAR"
  rm -f "$OUTDIR/use.sh"
  sed "s#@TAR@#${TAR}#g; s#@TAGS@#${TAGS[*]}#g; s#@OUTDIR@#${OUTDIR}#g" > "$OUTDIR/use.sh" <<'EOF'
# Device side, AFTER `. .gpu/gpu_env.sh` (which fills /tmp/site):  `. @OUTDIR@/use.sh`
# Unpacks @TAR@ once per warm machine into /tmp/fi-overlays, then builds, for every release tag in
# GDN_FI_TAGS, /tmp/site-<tag> = hard-linked copy (cp -al) of /tmp/site whose flashinfer package and
# flashinfer_python-*.dist-info are that release's (pruned). PYTHONPATH is left alone (/tmp/site keeps the
# .gpu bundle's release). Exports GDN_FI_TAGS and, per tag:
#   GDN_FI_SITE_<tag>=/tmp/site-<tag>      GDN_FI_VERSION_<tag>=<the release>
#   GDN_FI_PYTHONPATH_<tag>=$PYTHONPATH with every /tmp/site entry moved to /tmp/site-<tag>
# e.g.  PYTHONPATH=$GDN_FI_PYTHONPATH_fi0610 python3 -m pytest fuzz/ --hypothesis-profile=h200 -k flashinfer
_O=${GDN_FI_OVERLAY_DIR:-@OUTDIR@}; _U=/tmp/fi-overlays
_s=$(cd /tmp/site 2>/dev/null && ls -d .site.tar.xz.*.ok 2>/dev/null | head -1)
if [ -z "$_s" ] || [ ! -d /tmp/site/flashinfer ]; then
  echo "use.sh: run '. .gpu/gpu_env.sh' first" >&2
else
  _m=.@TAR@.$(stat -c %s $_O/@TAR@)   # redone when the archive changes
  if [ ! -f "$_U/$_m" ]; then rm -rf $_U && mkdir -p $_U && tar -xJf $_O/@TAR@ -C $_U && touch "$_U/$_m"; fi
  export GDN_FI_TAGS="@TAGS@"
  for _t in $GDN_FI_TAGS; do
    _B=/tmp/site-$_t; _f=$_B/$_m.${_s#.}   # redone when either archive changes
    if [ ! -f "$_f" ]; then
      rm -rf $_B && cp -al /tmp/site $_B && rm -f $_B/.*.ok
      rm -rf $_B/flashinfer $_B/flashinfer_python-*.dist-info
      cp -al $_U/$_t/flashinfer $_U/$_t/flashinfer_python-*.dist-info $_B/ && touch "$_f"
    fi
    export GDN_FI_SITE_$_t=$_B
    export GDN_FI_VERSION_$_t="$(cat $_U/$_t/.version)"
    export GDN_FI_PYTHONPATH_$_t="$(printf %s "$PYTHONPATH" | sed "s#/tmp/site\(/\|:\|\$\)#$_B\1#g")"
    echo "use.sh: GDN_FI_SITE_$_t=$_B = flashinfer $(sed -n 's/^Version: //p' $_B/flashinfer_python-*.dist-info/METADATA)"
  done
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

# 5. flashinfer: closure of its start modules (~60 files, 2.2 MB raw for 0.7.4)
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
