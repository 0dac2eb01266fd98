#!/usr/bin/env bash
# (issue 10) What a redirect does when a stream it must order with is
# blocked on the program's later work: a stream the program created on
# device 1 waits for a flag that the launch stream's next write sets (the
# shape of a collective's two halves).  Without ctxguard the call runs on
# the launch stream, the write follows, nothing waits.  Under --mode
# redirect the bundled kernel waits for that stream's tail and the launch
# stream waits for the bundled kernel, so the write never comes: the launch
# stream hangs until the flag is set from elsewhere (here the program, after
# 5 s, from the host), then D is right.  README's Redirect section documents
# this; the case checks that it is exactly that and nothing worse.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/redirect.sh
. "$(dirname "$0")/../redirect.sh"
need_two_devices
run plain "$REDIRECT" bf16 contiguous blocked "$SM90_CUBIN"
show plain
expect_status 0
run redirect "$CTXGUARD" --mode redirect -- "$REDIRECT" bf16 contiguous blocked "$SM90_CUBIN"
show redirect
expect_status 6
grep -q '^ctxguard: redirect:' "$TMP/redirect.err" || fail "the call was not redirected"
grep -q '^deepgemm_redirect: blocked:' "$TMP/redirect.out" || fail "no blocked line"
grep -q 'rel error' "$TMP/redirect.out" || fail "D was not checked after the release"
pass "a stream blocked on the launch stream's later work holds a redirected call until released; D right after"
