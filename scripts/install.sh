#!/usr/bin/env bash
# Sets up .venv/ with gdn-fuzz, its CPU targets (fla-core; SGLang's Triton kernel files) and the test tools.
# SGLang goes in with --no-deps: its declared dependencies are a whole serving stack, while the kernel
# files need only torch, triton and packaging (fuzz/targets/sglang_loader.py skips the package init).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
export PIP_CONSTRAINT="$PWD/constraints-cpu.txt" PIP_DISABLE_PIP_VERSION_CHECK=1
.venv/bin/python -m pip install -q -e ".[triton,sglang,dev]"
.venv/bin/python -m pip install -q --no-deps "sglang==0.5.23"
