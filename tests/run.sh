#!/bin/sh
# Runs the Check binaries under the shim with the fake driver, then prints
# the totals: one line per passing suite, a failing suite's whole output.
# Usage: tests/run.sh build/tests/check_*   (BUILD, SAN_RUNTIME from make;
# VERBOSE=1 prints every suite's output)
BUILD=${BUILD:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
# The suite's copy of the library, whose system policy is its own (tests/locked.mk);
# CTXGUARD_TEST_LIBRARY: run the suite against another build of the library (an installed wheel's)
lib="${CTXGUARD_TEST_LIBRARY:-$root/$BUILD/tests/suite/libctxguard.so}"
preload="$lib"
[ -n "$SAN_RUNTIME" ] && preload="$SAN_RUNTIME:$lib"
export CTXGUARD_TEST_BUILD="$root/$BUILD"
export CTXGUARD_TEST_PRELOAD="$preload"
export LD_LIBRARY_PATH="$root/$BUILD/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Sanitizer reports fail the run; a preloaded runtime would otherwise be
# noisy about the deliberately aborting child processes.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
# Sanitized binaries run several times slower: stretch Check's per-test
# timeouts for them (check_policy's truncation test timed out under TSan).
[ -n "$SAN_RUNTIME" ] && export CK_TIMEOUT_MULTIPLIER="${CK_TIMEOUT_MULTIPLIER:-4}"
unset CTXGUARD_MODE CTXGUARD_SCOPE CTXGUARD_POLICY CTXGUARD_LOG CTXGUARD_METRICS CTXGUARD_OPERANDS \
      CTXGUARD_EXIT_CODE CTXGUARD_QUIET CTXGUARD_STATUS
CTXGUARD_TEST_RECORDS=$(mktemp /tmp/ctxguard-records.XXXXXX)
export CTXGUARD_TEST_RECORDS
passed=0 failed=0 status=0
for t in "$@"; do
	out=$(LD_PRELOAD="$preload" CTXGUARD_QUIET=1 "$t" 2>&1)
	rc=$?
	line=$(printf '%s\n' "$out" | grep -E '^[0-9]+%: Checks: ' | tail -n 1)
	if [ -z "$line" ]; then
		printf '%s\n' "$out"
		echo "$(basename "$t"): no Check summary (exit $rc)"
		failed=$((failed + 1)); status=1; continue
	fi
	n=$(echo "$line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
	f=$(echo "$line" | sed -E 's/.*Failures: ([0-9]+).*/\1/')
	e=$(echo "$line" | sed -E 's/.*Errors: ([0-9]+).*/\1/')
	passed=$((passed + n - f - e)); failed=$((failed + f + e))
	[ "$rc" -ne 0 ] && status=1
	# A suite's output (mostly the crossing reports its tests provoke) only
	# when it failed, or with VERBOSE=1.
	if [ "$rc" -ne 0 ] || [ $((f + e)) -ne 0 ] || [ -n "$VERBOSE" ]; then
		printf '%s\n' "$out"
	else
		echo "ok $(basename "$t"): $n checks"
	fi
done
# Every log record the suites read, against docs/log-schema.json: one more
# check (tests/log_schema.py; needs python3's jsonschema, as deps.sh installs).
if [ -s "$CTXGUARD_TEST_RECORDS" ]; then
	if schema=$(python3 "$root/tests/log_schema.py" "$CTXGUARD_TEST_RECORDS" 2>&1); then
		passed=$((passed + 1)); echo "ok $schema"
	else
		failed=$((failed + 1)); status=1; printf '%s\n' "$schema"
	fi
fi
rm -f "$CTXGUARD_TEST_RECORDS"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && exit $status
exit 1
