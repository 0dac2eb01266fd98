# shellcheck shell=bash
# Helpers for the redirect cases (20-27, issue 10), sourced after lib.sh.
# Each runs examples/deepgemm_redirect over (dtype, layout, situation)
# combinations, prints one verdict line per combination and a tally, and
# leaves the number of failed combinations in FAILED.

# shellcheck disable=SC2034  # the arrays are the cases' to use
REDIRECT=${REDIRECT:-$BUILD/examples/deepgemm_redirect}
SM90_CUBIN=${SM90_CUBIN:-$BUILD/gpu/deepgemm_sm90.cubin}

# The (dtype layout) pairs deepgemm_sm90.cu instantiates: those the bundled
# kernels compute today, and those waiting for the psum / masked layouts.
COMBOS_CONTIGUOUS=("bf16 normal" "bf16 contiguous" "bf16nn contiguous" "fp8 normal" "fp8 contiguous")
COMBOS_LAYOUTS=("bf16 psum" "bf16 masked" "fp8 psum" "fp8 masked")
CROSSING_SITUATIONS=(silent race-default race-side handle handle-side)
# Those one GPU reproduces, with a context created on device 0 (second_context).
HANDLE_SITUATIONS=(handle handle-side)

# matrix VERDICT COMBO...: for every COMBO and every situation in the
# caller's SITUATIONS array, runs "${RUNNER[@]}" deepgemm_redirect
# "${SECOND[@]}" DTYPE LAYOUT SITUATION (RUNNER: the caller's ctxguard
# command line ending in "--", or empty; SECOND: second_context's option,
# or empty), then VERDICT NAME SITUATION, which prints nothing and
# returns 0 for a pass or echoes why and returns 1.  A failed combination
# prints its evidence.
matrix() {
	local verdict=$1 combo sit name why
	shift
	FAILED=0
	local passed=0
	for combo in "$@"; do
		for sit in "${SITUATIONS[@]}"; do
			name=${combo/ /_}_$sit
			# shellcheck disable=SC2086  # combo is "DTYPE LAYOUT"
			"${RUNNER[@]}" "$REDIRECT" "${SECOND[@]}" $combo "$sit" "$SM90_CUBIN" \
				>"$TMP/$name.out" 2>"$TMP/$name.err"
			STATUS=$?
			if why=$("$verdict" "$name" "$sit"); then
				printf 'PASS  %-18s %-13s exit %s\n' "$combo" "$sit" "$STATUS"
				passed=$((passed + 1))
			else
				printf 'FAIL  %-18s %-13s exit %s: %s\n' "$combo" "$sit" "$STATUS" "$why"
				FAILED=$((FAILED + 1))
				grep -aE '^deepgemm_redirect: .*(rel error|producer|launching)|^silent corruption|^WRONG' \
					"$TMP/$name.out" | sed 's/^/      /'
				grep -aE '^(ctxguard|CUDA driver error|DeepGEMM experts)' "$TMP/$name.err" |
					head -n 12 | sed 's/^/      /'
			fi
		done
	done
	echo "combinations: $passed passed, $FAILED failed"
}

# has NAME STREAM EXTENDED-REGEX
has() {
	grep -aqE -- "$3" "$TMP/$1.$2"
}

# The race situations (and handle-side) must have raced: the chain still
# ran at the call.
raced() {
	[[ $2 != race-* && $2 != handle-side ]] ||
		has "$1" out '^deepgemm_(redirect|torch): producer still running at the call: yes'
}

# Under --mode redirect: correct output, a redirect reported and counted.
verdict_redirected() {
	[[ $STATUS == 0 ]] || { echo "exit $STATUS, not 0"; return 1; }
	has "$1" out '^deepgemm_redirect: ok$' || { echo "no ok line"; return 1; }
	raced "$1" "$2" || { echo "the producer had finished before the call: no race"; return 1; }
	has "$1" err '^ctxguard: redirect:' || { echo "no 'ctxguard: redirect:' line on stderr"; return 1; }
	has "$1" err '^ctxguard: pid [0-9]+:.*redirect [1-9]' || { echo "summary counts no redirect"; return 1; }
}

# Without ctxguard: silent runs right over peer access, the races are wrong
# (the call read A before device 1 finished it), handle and handle-side are
# refused.
verdict_plain() {
	case $2 in
	silent)
		[[ $STATUS == 0 ]] || { echo "exit $STATUS, not 0: the fixture is wrong over peer access"; return 1; } ;;
	race-*)
		[[ $STATUS == 4 ]] || { echo "exit $STATUS, not 4: the race did not corrupt D"; return 1; }
		raced "$1" "$2" || { echo "the producer had finished before the call"; return 1; } ;;
	handle*)
		[[ $STATUS == 3 ]] || { echo "exit $STATUS, not 3"; return 1; }
		has "$1" err 'CUDA_ERROR_INVALID_HANDLE' || { echo "no INVALID_HANDLE from the driver"; return 1; } ;;
	esac
}

# Under --mode abort: killed before the situation's launch went through,
# with the documented message first and a deep_gemm kernel named.
verdict_aborted() {
	[[ $STATUS == 134 ]] || { echo "exit $STATUS, not 134 (SIGABRT)"; return 1; }
	[[ $(head -n 1 "$TMP/$1.err") == "$DEEPGEMM_MESSAGE" ]] || { echo "first stderr line is not the documented message"; return 1; }
	has "$1" out "^deepgemm_redirect: launching .* \\($2," || { echo "never reached the crossing call"; return 1; }
	! has "$1" out "^deepgemm_redirect: launch returned CUDA_SUCCESS \\($2," ||
		{ echo "a crossing launch went through"; return 1; }
	has "$1" err '^ctxguard: .*(transpose_fp32|sm90_bf16_gemm_impl|sm90_fp8_gemm_1d2d_impl)' ||
		{ echo "the report names no deep_gemm kernel"; return 1; }
}

# Everything on device 0: correct, nothing redirected, no crossing.
verdict_same() {
	[[ $STATUS == 0 ]] || { echo "exit $STATUS, not 0"; return 1; }
	has "$1" out '^deepgemm_redirect: ok$' || { echo "no ok line"; return 1; }
	[[ -s $TMP/$1.err ]] || return 0          # the plain run: no ctxguard lines
	! has "$1" err '^ctxguard: redirect:' || { echo "redirected a launch that does not cross"; return 1; }
	has "$1" err '^ctxguard: pid [0-9]+:.*[^0-9]0 crossings' || { echo "summary missing or reports crossings"; return 1; }
}

# torch_situations PROGRAM...: runs PROGRAM [SECOND] SITUATION
# (examples/deepgemm_torch.py and its options) without ctxguard in
# race-default after a real race (its D is reported; on H200 from PyTorch it
# came out right, while the C route of case 21 shows the race corrupting D),
# then under --mode redirect in every situation it knows, each of which must
# be right and redirected; fails the case otherwise.  With a created context
# (SECOND, second_context) handle alone, refused without ctxguard.
torch_situations() {
	local sit
	local -a failed=() sits=(silent race-default race-side handle)
	if (( ${#SECOND[@]} )); then
		sits=(handle)
		echo "== without ctxguard: handle"
		run plain "$@" "${SECOND[@]}" handle
		show plain
		if [[ $STATUS != 3 ]] || ! grep -q 'CUDA_ERROR_INVALID_HANDLE' "$TMP/plain.err"; then
			fail "without ctxguard: exit $STATUS, expected 3 with CUDA_ERROR_INVALID_HANDLE"
		fi
	else
		echo "== without ctxguard: race-default"
		run plain "$@" race-default
		show plain
		[[ $STATUS != 5 ]] || skip "$(tail -n 1 "$TMP/plain.out")"
		grep -q 'producer still running at the call: yes' "$TMP/plain.out" || fail "the producer had finished: no race"
		case $STATUS in
		4) echo "without ctxguard: D is wrong (the race corrupted it)" ;;
		0) echo "without ctxguard: D came out right this time (no corruption seen from PyTorch)" ;;
		*) fail "without ctxguard: exit $STATUS, expected 4 (wrong D) or 0" ;;
		esac
	fi
	for sit in "${sits[@]}"; do
		echo "== --mode redirect: $sit"
		run "$sit" "$CTXGUARD" --mode redirect -- "$@" "${SECOND[@]}" "$sit"
		show "$sit"
		if [[ $STATUS == 0 ]] && grep -qx 'deepgemm_torch: ok' "$TMP/$sit.out" &&
			grep -q '^ctxguard: redirect:' "$TMP/$sit.err" && raced "$sit" "$sit"; then
			echo "PASS $sit"
		else
			echo "FAIL $sit"
			failed+=("$sit")
		fi
	done
	(( ${#failed[@]} == 0 )) || fail "wrong or not redirected under --mode redirect: ${failed[*]}"
}

# need_two_devices: skips where two devices with peer access are not there.
need_two_devices() {
	need_gpus 2 "$OPERAND_ON_ANOTHER_DEVICE"
	need_files "$REDIRECT" "$SM90_CUBIN"
	"$REDIRECT" bf16 contiguous silent "$SM90_CUBIN" >"$TMP/probe.out" 2>&1
	[[ $? != 5 ]] || skip "$(tail -n 1 "$TMP/probe.out")"
}

# crossing_matrix VERDICT MODE COMBO...: matrix over the crossing situations
# under ctxguard --mode MODE (none: without ctxguard); on one GPU over the
# handle situations, with a context created on device 0 (second_context).
crossing_matrix() {
	local verdict=$1 mode=$2
	shift 2
	second_context
	need_files "$REDIRECT" "$SM90_CUBIN"
	if (( ${#SECOND[@]} )); then
		SITUATIONS=("${HANDLE_SITUATIONS[@]}")
		echo "# one GPU: ${SITUATIONS[*]} only; the others need $OPERAND_ON_ANOTHER_DEVICE"
	else
		need_two_devices
		SITUATIONS=("${CROSSING_SITUATIONS[@]}")
	fi
	RUNNER=()
	if [[ $mode != none ]]; then
		need_files "$CTXGUARD"
		RUNNER=("$CTXGUARD" --mode "$mode" --)
	fi
	matrix "$verdict" "$@"
}
