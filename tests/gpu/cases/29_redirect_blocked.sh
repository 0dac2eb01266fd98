#!/usr/bin/env bash
# (issue 10) What a redirect does when a stream it must order with is
# blocked on the program's later work: a stream the program created on
# device 1 waits for a flag that the launch stream's next write sets (the
# shape of a collective's two halves).  Without ctxguard the call runs on
# the launch stream, the write follows, nothing waits.  Under --mode
# redirect the bundled kernel waits for that stream's tail and the launch
# stream waits for the bundled kernel, so the write cannot run until the
# program releases the flag from the host after 5 s: exit 6, D right.  The
# redirected call itself must return: the bundled kernels were loaded into
# device 1 when the program created its stream there (shim/redirect/warm.c); loaded
# inside the redirect, the load waited for device 1's work and the process
# hung in ctxguard's call (seen on two H200s before warming).  docs/redirect.md's
# Deadlock section documents the hazard.
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
   pass "blocked as documented: the redirected call returned, the launch stream waited until the flag was set from the host; D right" ;;
124|137) fail "hung: the redirected call did not return (were the bundled kernels not loaded ahead?)" ;;
*) fail "exit $STATUS: neither right nor blocked" ;;
esac
