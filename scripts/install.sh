#!/usr/bin/env bash
# Sets up .venv/ with gdn-fuzz, its CPU targets (fla-core; SGLang's Triton kernel files and GDN glue; vLLM's
# spec-decode GDN Triton kernels) and the test tools.
# SGLang and vLLM go in with --no-deps: their declared dependencies are a whole serving stack, while the files
# loaded need only torch, triton, einops and packaging (fuzz/targets/sglang_loader.py, sglang_glue_loader.py and
# vllm_loader.py skip the package inits). The vLLM wheel is 239 MB (546 MB installed; 40-60 s here).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
export PIP_CONSTRAINT="$PWD/constraints-cpu.txt" PIP_DISABLE_PIP_VERSION_CHECK=1
.venv/bin/python -m pip install -q -e ".[triton,sglang,vllm,dev]"
.venv/bin/python -m pip install -q --no-deps "sglang==0.5.23" "vllm==0.34.0"
