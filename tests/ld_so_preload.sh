#!/bin/sh
# The enforcement path for a machine (docs/security.md): ctxguard listed in
# /etc/ld.so.preload with a locked policy that turns the backstop on.  In a
# chroot built from the suite's files (the programs, their libraries, the
# fake driver and CUPTI, the locked library copy with its system policy),
# a program run with no LD_PRELOAD at all, one whose child drops it, and
# one that preloads an interposer of the driver's entry points ahead of
# ctxguard are all stopped at the crossing; without the lock's backstop the
# interposer's launch gets through (the escape the backstop closes).
# CI runs it as root (chroot); elsewhere it skips.  Usage: tests/ld_so_preload.sh [BUILD]
set -eu
build=$(cd "${1:-build}" && pwd)
if [ "$(id -u)" != 0 ]; then
	echo "ld_so_preload: skipped (chroot needs root)"
	exit 77
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
lib=$build/tests/locked/libctxguard.so
prog=$build/tests/progs/scenario
cupti=$build/fake/cupti/libcupti.so
bypass=$build/tests/libs/libbypass.so
files="$prog $lib $cupti $bypass /bin/sh /usr/bin/env"

# Each file at its own path inside the root, with what the loader needs.
copy() {
	mkdir -p "$root$(dirname "$1")"
	cp -L "$1" "$root$1"
}
for f in $files; do
	copy "$f"
	ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'
done | sort -u | while read -r dep; do copy "$dep"; done
# The driver where a system's is found (no /proc in the root: $ORIGIN in a
# run path does not resolve there).
mkdir -p "$root/etc" "$root/tmp" "$root/usr/lib" "$root$build/tests/etc/ctxguard"
cp "$build/fake/libcuda.so.1" "$root/usr/lib/libcuda.so.1"
echo "$lib" > "$root/etc/ld.so.preload"

policy() {
	printf '%s\n' "$@" > "$root$build/tests/etc/ctxguard/policy.conf"
}

fails=0
# expect WHAT STATUS TEXT... -- COMMAND: the command's status and each
# TEXT in its stderr.
expect() {
	what=$1 want=$2
	shift 2
	texts=
	while [ "$1" != -- ]; do
		texts="$texts$1
"
		shift
	done
	shift
	set +e
	err=$(chroot "$root" /usr/bin/env -i PATH=/bin:/usr/bin "$@" 2>&1 >/dev/null)
	got=$?
	set -e
	ok=1
	[ "$got" = "$want" ] || ok=0
	while IFS= read -r t; do
		[ -z "$t" ] && continue
		printf '%s' "$err" | grep -qF -- "$t" || ok=0
	done <<TEXTS
$texts
TEXTS
	if [ $ok = 1 ]; then
		echo "ld_so_preload: ok: $what"
	else
		echo "ld_so_preload: FAILED: $what (status $got, want $want)"
		printf '%s\n' "$err" | sed 's/^/    /'
		fails=$((fails + 1))
	fi
}

stopped="DeepGEMM experts selected on a model spanning multiple CUDA devices"
policy "lock = on" "backstop = on" "cupti = $cupti"
expect "no LD_PRELOAD: stopped" 134 "$stopped" -- "$prog" direct data launch cross
expect "a child without LD_PRELOAD: stopped" 134 "$stopped" -- \
	/bin/sh -c "exec /usr/bin/env -u LD_PRELOAD $prog direct data launch cross"
expect "an interposer ahead of ctxguard: said, and its launch stopped by the backstop" 134 \
	"defines cuLaunchKernel" "seen by the CUPTI backstop" "$stopped" -- \
	/usr/bin/env LD_PRELOAD="$bypass" "$prog" direct data launch cross
policy "lock = on"
expect "without the backstop the interposer's launch gets through (the driver refuses it)" 3 \
	"defines cuLaunchKernel" -- /usr/bin/env LD_PRELOAD="$bypass" "$prog" direct data launch cross
[ $fails = 0 ]
