#!/usr/bin/env bash
# (issue 10) What a redirect does when a stream it must order with is
# blocked on the program's later work: a stream the program created on
# device 1 waits for a flag that the launch stream's next write sets (the
# shape of a collective's two halves).  Without ctxguard the call runs on
# the launch stream, the write follows, nothing waits.  Under --mode
# redirect the bundled kernel waits for that stream's tail and the launch
# stream waits for the bundled kernel, so the write never comes.  Seen on
# two H200s: the process hangs in the redirected call itself (the first
# redirect into device 1 loads the bundled kernels there, and the load
# waits for device 1's work), so the program's own release after 5 s never
# runs.  README's Redirect section documents this hazard; the case records
# which of the outcomes happens (bounded to 30 s) and fails on a wrong D or
# a crash.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/redirect.sh
. "$(dirname "$0")/../redirect.sh"
need_two_devices
run plain "$REDIRECT" bf16 contiguous blocked "$SM90_CUBIN"
show plain
expect_status 0
run redirect timeout -k 5 30 "$CTXGUARD" --mode redirect -- "$REDIRECT" bf16 contiguous blocked "$SM90_CUBIN"
show redirect
case $STATUS in
0) pass "not blocked: the redirected call did not wait for the blocked stream" ;;
6) grep -q '^deepgemm_redirect: blocked:' "$TMP/redirect.out" || fail "exit 6 without the blocked line"
   pass "blocked as documented: the launch stream waited until the flag was set from the host; D right" ;;
124|137) pass "hung as documented: the redirected call waits for device 1, whose stream waits for the launch stream" ;;
*) fail "exit $STATUS: neither right, blocked nor hung" ;;
esac
