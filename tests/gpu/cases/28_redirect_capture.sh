#!/usr/bin/env bash
# (issue 10) A crossing DeepGEMM call inside CUDA stream capture (current
# device 0, operands on device 1; warm-up, capture on a stream of device 0,
# graph launch, D reset, replay).  Without ctxguard the replay is right (no
# race: peer access).  Under --mode redirect either the redirect pattern is
# captured and the replay is right and reported, or ctxguard falls back
# with a message that names the capture -- never a wrong D or a capture
# broken by ctxguard (a driver error from the program's own capture calls).
# shellcheck disable=SC2317  # the verdicts are called through matrix
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/redirect.sh
. "$(dirname "$0")/../redirect.sh"

# Under --mode redirect: redirected and right, or a precise fallback.
verdict_capture() {
	if [[ $STATUS == 0 ]]; then
		has "$1" out '^deepgemm_redirect: ok$' || { echo "no ok line"; return 1; }
		has "$1" out 'graph captured, launched, D reset, replayed' || { echo "no replay"; return 1; }
		has "$1" err '^ctxguard: redirect:' || { echo "correct, but not redirected"; return 1; }
		return 0
	fi
	[[ $STATUS != 4 ]] || { echo "wrong D after the replay"; return 1; }
	has "$1" err '^ctxguard: .*captur' || { echo "exit $STATUS without a ctxguard line naming the capture"; return 1; }
}

verdict_capture_plain() {
	[[ $STATUS == 0 ]] || { echo "exit $STATUS, not 0"; return 1; }
	has "$1" out 'graph captured, launched, D reset, replayed' || { echo "no replay"; return 1; }
}

need_two_devices
need_files "$CTXGUARD"
SITUATIONS=(capture)
echo "== without ctxguard"
RUNNER=()
matrix verdict_capture_plain "bf16 contiguous" "fp8 contiguous"
(( FAILED == 0 )) || fail "the capture is wrong without ctxguard: the case cannot judge ctxguard"
echo "== ctxguard --mode redirect"
RUNNER=("$CTXGUARD" --mode redirect --)
matrix verdict_capture "bf16 contiguous" "fp8 contiguous"
(( FAILED == 0 )) || fail "$FAILED captured crossing calls wrong, or refused without naming the capture"
grep -h '^ctxguard: .*captur' "$TMP"/*_capture.err 2>/dev/null | sort -u | head -n 5
pass "captured crossing calls replay correctly under --mode redirect, or fall back naming the capture"
