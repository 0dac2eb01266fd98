#!/usr/bin/env bash
# (o) No false positive on CUDA graphs: a whole training step captured in a
# torch.cuda.CUDAGraph on each device and replayed on new data, under
# --mode abort --scope all: matches eager training, 0 crossings.  One GPU:
# cuda:0 alone.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 1
need_files "$CTXGUARD" examples/torch_compile_graph.py
need_python torch
run graph "$CTXGUARD" --mode abort --scope all --error-exitcode 86 --log "$TMP/graph.%p.jsonl" -- \
	"$PYTHON" examples/torch_compile_graph.py graph
show graph
expect_clean graph "torch_compile_graph: ok"
pass "CUDA graph capture and replay on both devices clean under --scope all"
