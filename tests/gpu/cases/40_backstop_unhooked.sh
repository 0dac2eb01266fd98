#!/usr/bin/env bash
# Issue 12: a launch past the hooks (cuLaunchKernel read from libcuda's
# .dynsym) goes unseen without --backstop; with it, it is checked at the
# API's entry, stopped before it runs, and counted as unhooked.  Two GPUs:
# the silent crossing (a device-0 kernel writing device 1's memory); one
# GPU: the handle crossing (device 0's function launched in a context
# created on device 0), which the driver refuses itself.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/cupti.sh
. "$(dirname "$0")/../cupti.sh"
second_context
UNHOOKED=$BUILD/gpu/unhooked_route
need_files "$CTXGUARD" "$UNHOOKED" "$CUBIN"
need_cupti
if (( ${#SECOND[@]} )); then
	route=cross kernel=ctxguard_fixture_empty unseen=3 why='the function belongs to another context'
else
	route=silent kernel=ctxguard_fixture_producer unseen=4 why='an operand lives on another device'
fi

# 1. No backstop: the crossing launch reaches the driver unseen.
run plain "$CTXGUARD" --mode abort --scope all -- "$UNHOOKED" "${SECOND[@]}" "$route" "$CUBIN"
show plain
[[ $STATUS != 5 ]] || skip "$(tail -n 1 "$TMP/plain.out")"
grep -q '(a wrapper)$' "$TMP/plain.out" || fail "dlsym did not return ctxguard's wrapper: not a route past the hooks"
expect_status "$unseen"
grep -q 'cross-context' "$TMP/plain.err" && fail "ctxguard reported the launch without the backstop"
expect_zero_crossings plain
echo "evidence: without --backstop the crossing reached the driver unseen"

# 2. --backstop: stopped at the API's entry, before the driver runs it.
run stopped "$CTXGUARD" --backstop --mode abort --scope all -- "$UNHOOKED" "${SECOND[@]}" "$route" "$CUBIN"
show stopped
expect_backstop_on stopped
expect_status 134
grep -q "^ctxguard: backstop: cuLaunchKernel of $kernel reached the driver without passing" \
	"$TMP/stopped.err" || fail "no unhooked line naming the kernel and the API"
grep -q '^ctxguard: seen by the CUPTI backstop' "$TMP/stopped.err" || fail "the report does not say the backstop saw it"
grep -qE "stopped \(abort\): $why" "$TMP/stopped.err" || fail "no abort saying: $why"
grep -q '^launch returned' "$TMP/stopped.out" && fail "the launch returned: it was not stopped before it ran"
grep -q '^device 1 memory written' "$TMP/stopped.out" && fail "the kernel ran"

# 3. warn, kind (a): reported, run, counted in the summary.
run counted "$CTXGUARD" --backstop --mode warn --scope all -- "$UNHOOKED" "${SECOND[@]}" cross "$CUBIN"
show counted
expect_backstop_on counted
expect_status 3
grep -q 'allowed (warn): the function belongs to another context' "$TMP/counted.err" || fail "no kind (a) warning"
grep -qE '^ctxguard: pid [0-9]+: .*warn 1, .*; backstop: unhooked 1 \(cuLaunchKernel of ctxguard_fixture_empty\)$' \
	"$TMP/counted.err" || fail "the summary does not count the unhooked launch"

# 4. --audit on a correct program: the unhooked launch alone fails it.
run audit "$CTXGUARD" --audit --scope all --error-exitcode 9 -- "$UNHOOKED" "${SECOND[@]}" same "$CUBIN"
show audit
expect_backstop_on audit
expect_status 9
grep -q '^ctxguard: 1 process launched kernels that bypassed the hooks' "$TMP/audit.err" || fail "no audit line"
pass "a launch past the hooks: unseen without the backstop, stopped and counted with it"
