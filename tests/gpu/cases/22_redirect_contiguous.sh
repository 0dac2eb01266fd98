#!/usr/bin/env bash
# (issue 10) ctxguard --mode redirect keeps every crossing DeepGEMM call
# correct for the layouts the bundled kernels compute (normal, m-grouped
# contiguous; bf16 nt and nn, fp8 with its transpose_fp32 re-homed): in
# each situation (silent, race-default, race-side, handle) D matches the CPU
# reference (bf16 1e-2, fp8 3e-2), stderr has a "ctxguard: redirect:" line
# and the summary counts the redirects.  Case 21 shows the same calls wrong
# or refused without ctxguard.
# One GPU: the handle situations with a context created on device 0
# (crossing_matrix); the others need a second device.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/redirect.sh
. "$(dirname "$0")/../redirect.sh"
crossing_matrix verdict_redirected redirect "${COMBOS_CONTIGUOUS[@]}"
(( FAILED == 0 )) || fail "$FAILED combinations wrong or not redirected"
pass "every normal / contiguous DeepGEMM call correct under --mode redirect"
