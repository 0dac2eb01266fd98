#!/usr/bin/env bash
# (issue 10) Redirect changes nothing for abort: under --mode abort every
# crossing call of case 21 (all dtypes, layouts, situations) is stopped
# before its launch goes through (fp8: at transpose_fp32, DeepGEMM's first
# launch of the call), with the documented message first.
# One GPU: the handle situations with a context created on device 0
# (crossing_matrix); the others need a second device.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/redirect.sh
. "$(dirname "$0")/../redirect.sh"
crossing_matrix verdict_aborted abort "${COMBOS_CONTIGUOUS[@]}" "${COMBOS_LAYOUTS[@]}"
(( FAILED == 0 )) || fail "$FAILED crossing calls not stopped before the launch"
pass "every crossing DeepGEMM call stopped before the launch under --mode abort"
