#!/usr/bin/env bash
# (j) The silent crossing seen through the TMA descriptors alone: the
# grouped_layout pointer stays on device 0, A, B and D are on device 1.
# Without ctxguard the GEMM runs on GPU 0 and D is wrong; under abort it is
# stopped before the launch, the report naming a tensor-map parameter.  The
# summary of a clean run says how descriptors were read on this driver
# (tensor_map_address_word: the learned word, -1 when looked up by hash).
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 2 "$OPERAND_ON_ANOTHER_DEVICE"
need_files "$CTXGUARD" "$ROUTE" "$CUBIN"
run plain "$ROUTE" silent_tmap "$CUBIN"
show plain
skip_if_unreproducible plain
expect_status 4
run abort "$CTXGUARD" --mode abort -- "$ROUTE" silent_tmap "$CUBIN"
show abort
expect_abort_report abort
grep -q 'grouped_layout on device 0' "$TMP/abort.out" || fail "the program never reached the crossing launch"
grep -q 'launch returned CUDA_SUCCESS (device 0 function and stream' "$TMP/abort.out" &&
	fail "the crossing launch went through"
grep -Eq 'parameter [456].*tensor map' "$TMP/abort.diag" || fail "the report names no tensor-map parameter"
run same "$CTXGUARD" --mode abort --scope all --log "$TMP/same.jsonl" -- "$ROUTE" same "$CUBIN"
expect_status 0
word=$(grep -o '"tensor_map_address_word":-\{0,1\}[0-9]*' "$TMP/same.jsonl" | tail -n 1)
[[ -n $word ]] || fail "no tensor_map_address_word in the summary"
echo "summary of a clean run: $word"
pass "tensor-map-only crossing stopped before the launch"
