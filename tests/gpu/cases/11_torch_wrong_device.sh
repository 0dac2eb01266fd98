#!/usr/bin/env bash
# (k) Issue 3 in PyTorch: a custom kernel of device 0 launched on device 0's
# stream with cuda:1 tensors (peer access on).  It matches no expert rule, so
# the default scope lets it run (the program completes); with --scope all,
# --mode abort stops it before the launch (SIGABRT, a report naming the
# parameter on device 1) and --mode error makes the launch return 400 with
# ctxguard's message in cuGetErrorString, printed by the program's own check.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 2 "$OPERAND_ON_ANOTHER_DEVICE"
need_files "$CTXGUARD" examples/torch_wrong_device.py
need_python torch
prog=("$PYTHON" examples/torch_wrong_device.py wrong)

echo "== default scope (experts): not an expert kernel, not checked"
run experts "$CTXGUARD" --mode abort -- "${prog[@]}"
show experts
[[ $STATUS != 77 ]] || skip "$(tail -n 1 "$TMP/experts.out")"
expect_status 0
grep -q '^torch_wrong_device: wrong: kernel ran on GPU 0 over cuda:1 memory' "$TMP/experts.out" ||
	fail "the crossing launch did not complete without checks"

echo "== --scope all --mode abort: stopped before the launch"
run abort "$CTXGUARD" --mode abort --scope all -- "${prog[@]}"
show abort
expect_status 134
grep -a '^ctxguard: ' "$TMP/abort.err" >"$TMP/abort.diag"
grep -q 'scale_add' "$TMP/abort.diag" || fail "diagnostics do not name the kernel"
grep -E 'parameter [0-9]+' "$TMP/abort.diag" | grep -qiE "$(device_re 1)" ||
	fail "diagnostics do not name the parameter on device 1"
grep -q '^torch_wrong_device: launching scale_add' "$TMP/abort.out" ||
	fail "the program never reached the crossing launch"
grep -q '^torch_wrong_device: launch returned CUDA_SUCCESS' "$TMP/abort.out" &&
	fail "the crossing launch went through"

echo "== --scope all --mode error: the launch fails with ctxguard's message"
run error "$CTXGUARD" --mode error --scope all -- "${prog[@]}"
show error
expect_status 3
line=$(grep -m 1 '^CUDA driver error (cuLaunchKernel)' "$TMP/error.err")
[[ -n $line ]] || fail "the program printed no launch error"
[[ $line == *": 400 ("* ]] || fail "error code is not 400: $line"
[[ $line == *ctxguard* && $line =~ parameter\ [0-9]+ ]] ||
	fail "the error string is not ctxguard's or names no parameter: $line"
grep -qiE "$(device_re 1)" <<<"$line" || fail "the error string does not name device 1: $line"
grep -qi 'core dumped' "$TMP/error.err" && fail "core dumped"
pass "silent PyTorch crossing stopped (abort) and refused (error) under --scope all"
