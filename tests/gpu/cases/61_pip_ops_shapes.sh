#!/usr/bin/env bash
# (p) ctxguard.grouped_mm / grouped_mm_fp8 from the installed package:
# tests/gpu/test_ops.py shapes (see its docstring), under the ctxguard command
# with --mode abort --scope all: its checks pass, 0 crossings.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/pip.sh
. "$(dirname "$0")/../pip.sh"
need_gpus 1
need_python torch
pip_env
export TRITON_CACHE_DIR=$TMP/triton TORCHINDUCTOR_CACHE_DIR=$TMP/inductor
run ops "$PIP_BIN/ctxguard" --mode abort --scope all --error-exitcode 86 --log "$TMP/ops.%p.jsonl" -- \
	"$PIP_PY" tests/gpu/test_ops.py shapes
cat "$TMP/ops.out"
expect_clean ops "test_ops: ok"
pass "ops shapes correct, 0 crossings"
