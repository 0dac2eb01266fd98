#!/bin/sh
# make fuzz: builds the libFuzzer targets with clang (installing Debian's
# clang when root and it is missing) and runs each: cg_policy_parse for
# FUZZ_SECONDS (default 60), then the redirect's decode against DeepGEMM's
# semantics (decode_diff, tests/model) for FUZZ_DECODE_SECONDS (default 30).
# Both run under an RSS limit of 1 GiB.  A pattern that makes the "re:"
# matcher allocate more than malloc_limit_mb, a launch
# the decoder redirects although the bundled kernels compute something
# else, or any ASan/UBSan report fails the run; its input is left in
# $BUILD/fuzz.  The corpora in the repository are read only: new inputs go to
# $BUILD/fuzz/corpus and $BUILD/fuzz/corpus_decode_diff.  The policy seeds hold the patterns that
# took glibc's regcomp to a stack overflow or gigabytes (regex_*.conf).
set -e
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SECONDS_TO_RUN=${FUZZ_SECONDS:-60}
DECODE_SECONDS=${FUZZ_DECODE_SECONDS:-30}
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
mkdir -p "$out/corpus" "$out/corpus_decode_diff"
SAN="-O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
CUDA_INC="-I${CUDA:-/usr/local/cuda}/include"
clang -std=c11 -D_GNU_SOURCE $SAN -o "$out/policy_parse" tests/fuzz/policy_parse.c policy/*.c
clang++ -std=c++17 -D_GNU_SOURCE $SAN -fsanitize=fuzzer-no-link -c -o "$out/bundled.o" \
	tests/model/bundled.cpp
clang -std=c11 -D_GNU_SOURCE $SAN $CUDA_INC -o "$out/decode_diff" tests/fuzz/decode_diff.c \
	tests/model/differ.c tests/model/deepgemm.c shim/redirect/decode.c "$out/bundled.o" -lstdc++
root=$(pwd)
cd "$out"
./policy_parse -max_total_time="$SECONDS_TO_RUN" -timeout=10 -max_len=16384 \
	-rss_limit_mb=1024 -malloc_limit_mb=256 -print_final_stats=1 \
	-dict="$root/tests/fuzz/policy.dict" corpus "$root/tests/fuzz/corpus/policy_parse"
exec ./decode_diff -max_total_time="$DECODE_SECONDS" -timeout=10 -max_len=64 \
	-rss_limit_mb=1024 -print_final_stats=1 corpus_decode_diff \
	"$root/tests/fuzz/corpus/decode_diff"
