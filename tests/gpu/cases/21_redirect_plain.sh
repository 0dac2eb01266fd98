#!/usr/bin/env bash
# (issue 10) What redirect has to fix, shown without ctxguard for every
# (dtype, layout): silent (current device 0, operands on device 1, peer
# access) computes the right D over peer access; race-default and race-side
# (device 1's legacy / non-blocking side stream still producing A) give a
# wrong D, so the redirect cases can fail; handle (current device 1) is
# refused with CUDA_ERROR_INVALID_HANDLE.
# One GPU: the handle situations with a context created on device 0
# (crossing_matrix); the others need a second device.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/redirect.sh
. "$(dirname "$0")/../redirect.sh"
crossing_matrix verdict_plain none "${COMBOS_CONTIGUOUS[@]}" "${COMBOS_LAYOUTS[@]}"
(( FAILED == 0 )) || fail "$FAILED combinations did not show the failure without ctxguard"
pass "without ctxguard: races corrupt D, handle is refused, silent runs over peer access"
