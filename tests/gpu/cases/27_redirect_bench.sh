#!/usr/bin/env bash
# (issue 10) The redirect's cost, side by side with a plain launch of the
# same bundled kernel on the right device (bench/bench_redirect.py, the
# command `make bench-redirect` runs): at most 1.10x at the Qwen3-30B-A3B
# decode shape and 1.02x at its prefill shape, outputs equal, and the
# crossing calls reported as redirected.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 2 "the cost of redirecting to another device"
need_python torch
SM90_CUBIN=${SM90_CUBIN:-$BUILD/gpu/deepgemm_sm90.cubin}
need_files "$CTXGUARD" "$BUILD/libctxguard.so" "$SM90_CUBIN" bench/bench_redirect.py
export CG_GMM_LIB=$PWD/$BUILD/libctxguard.so   # the plain side: the same bundled kernels
run bench "$CTXGUARD" --mode redirect -- \
	"$PYTHON" bench/bench_redirect.py --cubin "$SM90_CUBIN"
show bench
[[ $STATUS != 5 ]] || skip "$(tail -n 1 "$TMP/bench.out")"
grep -q '^ctxguard: redirect:' "$TMP/bench.err" || fail "no 'ctxguard: redirect:' line: the calls were not redirected"
expect_status 0
pass "redirect within its targets (figures above)"
