#!/usr/bin/env bash
# What ctxguard adds to launch-bound work: each benchmark runs PAIRS times
# without and with the shim, alternately (plain, shim, plain, shim ...), so
# drift of the machine hits both sides alike.  The shim runs as deployed:
# LD_PRELOAD=libctxguard.so, CTXGUARD_QUIET=1, the built-in default policy
# (CTXGUARD_POLICY=none, so no /etc file skews it; scope experts, operands
# on).  Each run reports its own median; a row compares the medians of the
# PAIRS plain and PAIRS shim medians against the target ratio, and also
# gives the median of the PAIRS ratios of each run to the plain run just
# before it (less sensitive to a machine that drifts during the benchmark):
#   driver   cuLaunchKernel, empty kernel (not an expert)       <= 1.01
#   runtime  cudaLaunchKernel (static cudart), same kernel      <= 1.01
#   expert   cuLaunchKernelEx, DeepGEMM-shaped kernel, every
#            pointer and TMA descriptor checked                 <= 1.03
#   moe      forward of the two-GPU MoE of GPU case 13          <= 1.005
# usage: bench/run_overhead.sh [BUILD_DIR]   (make bench-overhead)
# env: PAIRS (7), LAUNCHES per rep (200000), REPS per run (5), MOE_ITERS (30),
#      PYTHON (python3).  Exits 1 when a run fails or a row misses its target;
#      the moe row is skipped without two GPUs or transformers/accelerate.
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build}
PAIRS=${PAIRS:-7}
LAUNCHES=${LAUNCHES:-200000}
REPS=${REPS:-5}
MOE_ITERS=${MOE_ITERS:-30}
PYTHON=${PYTHON:-python3}
BENCH=$BUILD/bench/launch_overhead
LIB=$(realpath -e "$BUILD/libctxguard.so" 2>/dev/null) || { echo "run_overhead: $BUILD/libctxguard.so is missing (make)"; exit 1; }
[[ -x $BENCH ]] || { echo "run_overhead: $BENCH is missing (make -f bench/bench.mk)"; exit 1; }

unset LD_PRELOAD
for _v in "${!CTXGUARD_@}"; do unset "$_v"; done
export HF_HUB_OFFLINE=1
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ctxguard-bench.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

# name | unit | target | shim environment | command
ROWS=(
	"driver|us/launch|1.01|CTXGUARD_QUIET=1|$BENCH driver $LAUNCHES $REPS"
	"runtime|us/launch|1.01|CTXGUARD_QUIET=1|$BENCH runtime $LAUNCHES $REPS"
	"expert|us/launch|1.03|CTXGUARD_QUIET=1 CTXGUARD_SCOPE=experts|$BENCH expert $LAUNCHES $REPS"
	"moe|ms/forward|1.005|CTXGUARD_QUIET=1|$PYTHON bench/moe_forward.py $MOE_ITERS"
)

median() {
	sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.4f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# measure SIDE "VAR=VALUE..." CMD...: one run, with the shim and those
# variables when SIDE is shim; its "median X" is appended to $TMP/SIDE.
measure() {
	local side=$1 out=$TMP/run.out st
	local -a vars=()
	[[ $side == shim ]] && read -r -a vars <<<"LD_PRELOAD=$LIB CTXGUARD_POLICY=none $2"
	shift 2
	env "${vars[@]}" "$@" >"$out" 2>&1
	st=$?
	if (( st == 77 )); then
		return 77
	fi
	local m
	m=$(sed -n 's/.* median \([0-9.]*\) .*/\1/p' "$out" | tail -n 1)
	if (( st != 0 )) || [[ -z $m ]]; then
		echo "run_overhead: $side run failed (exit $st): ${vars[*]} $*"
		sed 's/^/  /' "$out" | tail -n 30
		return 1
	fi
	echo "$m" >>"$TMP/$side"
	printf '  %-5s %s\n' "$side" "$m"
}

table=() failed=0
for row in "${ROWS[@]}"; do
	IFS='|' read -r name unit target env cmd <<<"$row"
	read -r -a argv <<<"$cmd"
	rm -f "$TMP/plain" "$TMP/shim"
	echo "== $name: $PAIRS pairs of ($cmd) plain / with $env"
	status=0
	for ((i = 1; i <= PAIRS && status == 0; i++)); do
		measure plain "" "${argv[@]}" || status=$?
		(( status == 0 )) && { measure shim "$env" "${argv[@]}" || status=$?; }
	done
	if (( status == 77 )); then
		table+=("$name|-|-|-|-|$target|skip ($(tail -n 1 "$TMP/run.out"))")
		continue
	fi
	if (( status != 0 )); then
		table+=("$name|-|-|-|-|$target|FAIL (run failed)")
		failed=1
		continue
	fi
	plain=$(median <"$TMP/plain")
	shim=$(median <"$TMP/shim")
	ratio=$(awk -v s="$shim" -v p="$plain" 'BEGIN { printf "%.4f", s / p }')
	paired=$(paste "$TMP/plain" "$TMP/shim" | awk '{ print $2 / $1 }' | median)
	verdict=$(awk -v r="$ratio" -v t="$target" 'BEGIN { print (r <= t ? "pass" : "FAIL") }')
	[[ $verdict == pass ]] || failed=1
	table+=("$name|$plain $unit|$shim $unit|$ratio|$paired|$target|$verdict")
done

echo
row_format='%-8s | %-18s | %-18s | %-7s | %-12s | %-6s | %s\n'
# shellcheck disable=SC2059
printf "$row_format" mode "plain median" "shim median" ratio "pair median" target result
for row in "${table[@]}"; do
	IFS='|' read -r name plain shim ratio paired target verdict <<<"$row"
	# shellcheck disable=SC2059
	printf "$row_format" "$name" "$plain" "$shim" "$ratio" "$paired" "$target" "$verdict"
done
exit "$failed"
