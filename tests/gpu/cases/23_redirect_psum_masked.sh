#!/usr/bin/env bash
# (issue 10) The same as case 22 for GemmType MGroupedContiguousWithPsumLayout
# and MGroupedMasked, bf16 and fp8.  These need the bundled kernels' psum
# and masked layouts; until they land ctxguard falls back to abort for them,
# and this case fails, naming each combination.
# One GPU: the handle situations with a context created on device 0
# (crossing_matrix); the others need a second device.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/redirect.sh
. "$(dirname "$0")/../redirect.sh"
crossing_matrix verdict_redirected redirect "${COMBOS_LAYOUTS[@]}"
(( FAILED == 0 )) || fail "$FAILED psum / masked combinations wrong or not redirected"
pass "every psum / masked DeepGEMM call correct under --mode redirect"
