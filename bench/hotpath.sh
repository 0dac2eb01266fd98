#!/usr/bin/env bash
# Instructions the shim adds to one launch (callgrind counts instructions:
# repeatable, whatever else the machine is doing).  For each kernel kind it
# runs bench/hotpath at two launch counts with and without the shim; the
# difference of the slopes is the shim's cost per launch.
# usage: bench/hotpath.sh [BUILD_DIR]   (make bench-hotpath)
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build}
LIB=$(realpath -e "$BUILD/libctxguard.so") || exit 1
command -v valgrind >/dev/null || { echo "hotpath: valgrind is not installed (apt-get install valgrind)"; exit 1; }
export LD_LIBRARY_PATH="$BUILD/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CTXGUARD_QUIET=1 CTXGUARD_POLICY=none
unset CTXGUARD_MODE CTXGUARD_SCOPE CTXGUARD_OPERANDS CTXGUARD_LOG
LO=2000 HI=22000
irs() {   # side kind n [VAR=VALUE] -> total instructions
	local pre=(env ${4:+"$4"})
	[[ $1 == shim ]] && pre+=(LD_PRELOAD="$LIB")
	"${pre[@]}" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BUILD/bench/hotpath" "$2" "$3" 2>&1 |
		sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
# Rows: the kernel kind, how the fake lays out its tensor maps: opaque
# (ctxguard hashes each descriptor to find its address) or with the address
# in word 0 (ctxguard learns that from the encodes and reads it), and the
# budget of added instructions (issue 63; none for the opaque row): above
# it the run fails, so CI keeps the launch path where it is.
printf '%-26s %18s %18s %8s %8s\n' kernel "plain instr/launch" "shim instr/launch" added budget
over=0
for row in "plain||100|" "runtime|cuKernelGetFunction first||" "expert|opaque tensor maps||" \
	   "expert|address in word 0|400|FAKE_CUDA_TMAP_ADDRESS_WORD=0"; do
	IFS='|' read -r kind label budget var <<<"$row"
	declare -A slope=()
	for side in plain shim; do
		a=$(irs $side "$kind" $LO "$var") b=$(irs $side "$kind" $HI "$var")
		[[ $a && $b ]] || { echo "hotpath: no instruction count from callgrind ($side, $kind)"; exit 1; }
		slope[$side]=$(( (b - a) / (HI - LO) ))
	done
	added=$(( slope[shim] - slope[plain] ))
	printf '%-26s %18d %18d %8d %8s\n' "$kind${label:+, $label}" "${slope[plain]}" "${slope[shim]}" \
		$added "${budget:--}"
	if [[ $budget ]] && (( added > budget )); then
		echo "hotpath: $kind${label:+, $label}: $added added instructions per launch, over the budget of $budget;" \
		     "profile it (callgrind's per-function counts, bench/hotpath.sh) and bring it back"
		over=1
	fi
done
exit $over
