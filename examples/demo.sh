#!/bin/sh
# The reproduction under ctxguard: DeepGEMM's route (dlopen + dlsym,
# cuLibraryLoadFromFile, cuKernelGetFunction with device 0 current,
# cuLaunchKernelEx for device 1), first without the shim, then in each mode.
# On a machine with two GPUs it runs examples/deepgemm_route on them; on any
# other machine it runs the same route against the fake driver of tests/.
BUILD=${BUILD:-build}
CTXGUARD="$BUILD/ctxguard"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${gpus:-0}" -ge 2 ]; then
	where="two GPUs"
	prog="$BUILD/examples/deepgemm_route"
	set -- "$prog" cross
	env_fake=""
else
	where="the fake driver (no GPU pair here)"
	set -- "$BUILD/tests/progs/scenario" dlsym library_file launchex cross
	env_fake="$BUILD/fake"
fi
run() {   # title, then the command
	title=$1; shift
	printf '\n=== %s\n$ %s\n' "$title" "$*"
	LD_LIBRARY_PATH="${env_fake:+$env_fake:}$LD_LIBRARY_PATH" "$@" 2>&1
	echo "(exit status $?)"
}
echo "ctxguard demo on $where"
run "without ctxguard: the driver's own error, or silent corruption" "$@"
run "ctxguard --mode error: the launch is refused with the documented message" \
	"$CTXGUARD" --mode error -- "$@"
run "ctxguard --mode warn: reported, then launched" "$CTXGUARD" --mode warn -- "$@"
run "ctxguard (abort, the default): stopped before the launch" "$CTXGUARD" -- "$@"
