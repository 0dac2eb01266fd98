#!/bin/sh
# make fuzz: builds the libFuzzer target for cg_policy_parse with clang
# (installing Debian's clang when root and it is missing) and runs it for
# FUZZ_SECONDS (default 60), under an RSS limit of 1 GiB.  A pattern that
# makes the "re:" matcher allocate more than malloc_limit_mb, an input
# slower than 10 s, or any ASan/UBSan report fails the run; its input is
# left in $BUILD/fuzz.  The seeds hold the patterns that took glibc's
# regcomp to a stack overflow or gigabytes (regex_*.conf).  The corpus in the repository is read only: new
# inputs go to $BUILD/fuzz/corpus.
set -e
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SECONDS_TO_RUN=${FUZZ_SECONDS:-60}
if ! command -v clang >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "ctxguard: installing Debian's clang (for libFuzzer)..." >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang >/dev/null 2>&1 ||
			{ apt-get update -q >/dev/null &&
			  DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang >/dev/null; }
	fi
	command -v clang >/dev/null 2>&1 ||
		{ echo "ctxguard: make fuzz needs clang: sudo apt-get install clang" >&2; exit 1; }
fi
out="$BUILD/fuzz"
mkdir -p "$out/corpus"
clang -std=c11 -D_GNU_SOURCE -O1 -g -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -o "$out/policy_parse" \
	tests/fuzz/policy_parse.c policy/*.c
cd "$out"
exec ./policy_parse -max_total_time="$SECONDS_TO_RUN" -timeout=10 -max_len=16384 \
	-rss_limit_mb=1024 -malloc_limit_mb=256 -print_final_stats=1 \
	-dict=../../tests/fuzz/policy.dict corpus ../../tests/fuzz/corpus/policy_parse
