#!/bin/sh
# Makes sure Debian's `check` (the unit-test framework) is installed.
set -e
if pkg-config --exists check 2>/dev/null; then
	exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "ctxguard: installing Debian's check (the test framework)..." >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q check pkg-config >/dev/null 2>&1 ||
		{ apt-get update -q >/dev/null && apt-get install -y -q check pkg-config >/dev/null; }
	pkg-config --exists check && exit 0
fi
echo "ctxguard: the test suite needs Debian's check; run: sudo apt-get install check pkg-config" >&2
exit 1
