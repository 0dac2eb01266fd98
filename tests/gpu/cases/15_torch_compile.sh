#!/usr/bin/env bash
# (n) No false positive on torch.compile: a transformer block compiled
# separately for cuda:0 and cuda:1 (Inductor's generated Triton kernels,
# cuBLAS, SDPA), forward + backward on each, under --mode abort --scope all:
# matches eager, 0 crossings.  One GPU: cuda:0 alone.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 1
need_files "$CTXGUARD" examples/torch_compile_graph.py
need_python torch triton
export TRITON_CACHE_DIR=$TMP/triton TORCHINDUCTOR_CACHE_DIR=$TMP/inductor
run compile "$CTXGUARD" --mode abort --scope all --error-exitcode 86 --log "$TMP/compile.%p.jsonl" -- \
	"$PYTHON" examples/torch_compile_graph.py compile
show compile
expect_clean compile "torch_compile_graph: ok"
pass "torch.compile on both devices clean under --scope all"
