#!/usr/bin/env bash
# (p) bench/bench_moe_backend.py from the installed package: a transformers
# Qwen3-30B-A3B MoE block on "ctxguard" vs "grouped_mm", prefill and decode,
# forward and forward + backward.  Passes when it runs and the two backends'
# outputs agree (rel diff <= 2e-2); the timings are evidence (the target,
# faster at both sizes, is judged from the summary line, not gated: the
# lent machines' timing noise is +-10%).
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/pip.sh
. "$(dirname "$0")/../pip.sh"
need_gpus 1
need_python torch transformers
pip_env reuse
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
run bench "$PIP_PY" bench/bench_moe_backend.py
show bench
expect_status 0
awk '$1 ~ /^(prefill|decode)$/ { n++; if ($NF + 0 > 2e-2) bad++ } END { exit !(n == 4 && !bad) }' "$TMP/bench.out" ||
	fail "expected 4 rows with outputs agreeing (rel diff <= 2e-2)"
pass "MoE block timed on both backends; $(grep '^summary' "$TMP/bench.out")"
