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
irs() {   # side kind n -> total instructions
	local pre=()
	[[ $1 == shim ]] && pre=(env LD_PRELOAD="$LIB")
	"${pre[@]}" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BUILD/bench/hotpath" "$2" "$3" 2>&1 |
		sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
printf '%-7s %16s %16s %12s\n' kernel "plain instr/launch" "shim instr/launch" "added"
for kind in plain expert; do
	for side in plain shim; do
		a=$(irs $side $kind $LO) b=$(irs $side $kind $HI)
		eval "${side}_slope=$(( (b - a) / (HI - LO) ))"
	done
	printf '%-7s %16d %16d %12d\n' "$kind" "$plain_slope" "$shim_slope" $(( shim_slope - plain_slope ))
done
