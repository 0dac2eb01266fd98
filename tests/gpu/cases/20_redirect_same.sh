#!/usr/bin/env bash
# (issue 10) The exact-ABI fixture is right on its own device, for every
# instantiated (dtype, layout): DeepGEMM's first call on device 0 checked
# against the CPU reference, without ctxguard and under --mode redirect
# --scope all, where nothing crosses, so nothing may be redirected.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/redirect.sh
. "$(dirname "$0")/../redirect.sh"
need_gpus 1
need_files "$CTXGUARD" "$REDIRECT" "$SM90_CUBIN"
SITUATIONS=(same)
echo "== without ctxguard"
RUNNER=()
matrix verdict_same "${COMBOS_CONTIGUOUS[@]}" "${COMBOS_LAYOUTS[@]}"
plain=$FAILED
echo "== ctxguard --mode redirect --scope all"
RUNNER=("$CTXGUARD" --mode redirect --scope all --)
matrix verdict_same "${COMBOS_CONTIGUOUS[@]}" "${COMBOS_LAYOUTS[@]}"
(( plain == 0 )) || fail "the fixture computes a wrong result on its own device ($plain combinations)"
(( FAILED == 0 )) || fail "$FAILED combinations wrong or redirected under --mode redirect with nothing crossing"
pass "fixture correct on device 0; nothing redirected when nothing crosses"
