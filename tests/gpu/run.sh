#!/usr/bin/env bash
# GPU integration suite, TAP-style (make test-gpu runs `tests/gpu/run.sh build`).
# usage: tests/gpu/run.sh [BUILD_DIR [CASE_SUBSTRING...]]
# Builds the fixture cubin and deepgemm_route through tests/gpu/gpu.mk when
# missing or stale, runs tests/gpu/cases/*.sh in order (each: exit 0 pass,
# 77 skip, else fail), prints "ok N - name" / "not ok N - name" with the
# case's evidence as "# " lines, and ends with "N passed, M failed[, K skipped]".
# Exits non-zero when any case failed.  CASE_TIMEOUT (seconds, default 600)
# bounds each case.
export BUILD=${1:-build}
(( $# )) && shift
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/lib.sh"
export CTXGUARD ROUTE CUBIN PYTHON

cases=()
for c in tests/gpu/cases/*.sh; do
	if (( $# == 0 )); then
		cases+=("$c")
	else
		for pat; do [[ $(basename "$c") == *"$pat"* ]] && { cases+=("$c"); break; }; done
	fi
done

gpus=$(gpu_count)
if (( gpus == 0 )); then
	if command -v nvidia-smi >/dev/null 2>&1; then why="nvidia-smi lists no GPU"; else why="nvidia-smi not found"; fi
	echo "1..0 # SKIP no GPU ($why)"
	echo "0 passed, 0 failed, ${#cases[@]} skipped"
	exit 0
fi
echo "# $gpus GPU(s) visible; build dir $BUILD; ctxguard $CTXGUARD"

if ! make -s -f tests/gpu/gpu.mk BUILD="$BUILD" gpu-fixtures >"$TMP/build.log" 2>&1; then
	sed 's/^/# /' "$TMP/build.log"
	echo "Bail out! could not build the GPU fixtures (tests/gpu/gpu.mk)"
	exit 1
fi

echo "1..${#cases[@]}"
n=0 passed=0 failed=0 skipped=0
for c in "${cases[@]}"; do
	n=$((n + 1))
	name=$(basename "$c" .sh)
	timeout -k 10 "${CASE_TIMEOUT:-600}" bash "$c" >"$TMP/case.log" 2>&1
	st=$?
	case $st in
	0)	echo "ok $n - $name"; passed=$((passed + 1)) ;;
	77)	echo "ok $n - $name # SKIP $(tail -n 1 "$TMP/case.log" | sed 's/^SKIP: //')"
		skipped=$((skipped + 1)) ;;
	124|137) echo "not ok $n - $name # timed out after ${CASE_TIMEOUT:-600} s"; failed=$((failed + 1)) ;;
	*)	echo "not ok $n - $name"; failed=$((failed + 1)) ;;
	esac
	sed 's/^/# /' "$TMP/case.log"
done

summary="$passed passed, $failed failed"
(( skipped )) && summary+=", $skipped skipped"
echo "$summary"
(( failed == 0 ))
