#!/usr/bin/env bash
# (p) No false positive on one device per process: a two-rank torchrun job
# (NCCL all-reduce, expert-parallel MoE step with all_to_all and grouped_mm,
# backward) under --mode abort --scope all: every rank's checks pass, both
# workers report launches and 0 crossings.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 2 "two ranks, one device each"
need_files "$CTXGUARD" examples/ep_torchrun.py
need_python torch
# NVLink multicast is off-limits on the test machine.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export TRITON_CACHE_DIR=$TMP/triton
port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') ||
	fail "no free TCP port"
run ep "$CTXGUARD" --mode abort --scope all --error-exitcode 86 --log "$TMP/ep.%p.jsonl" -- \
	"$PYTHON" -m torch.distributed.run --nproc_per_node=2 --master_addr=127.0.0.1 --master_port="$port" \
	examples/ep_torchrun.py
show ep
expect_clean ep "ep_torchrun: ok"
workers=$(grep -E '^ctxguard: pid [0-9]+:' "$TMP/ep.err" | grep -cvE ' 0 launches checked')
(( workers >= 2 )) || { evidence ep; fail "$workers process(es) checked launches, expected both workers"; }
pass "two-rank EP job clean under --scope all"
