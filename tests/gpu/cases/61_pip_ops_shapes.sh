#!/usr/bin/env bash
# (p) ctxguard.grouped_mm / grouped_mm_fp8 from the installed package against
# float64 references: every bench/bench_grouped_mm.py shape, the edge cases,
# other devices and streams, mixed devices (tests/gpu/test_ops.py shapes).
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/pip.sh
. "$(dirname "$0")/../pip.sh"
need_gpus 1
need_python torch
pip_env reuse
pip_test_ops shapes
pass "ops correct on every shape and edge case, 0 crossings"
