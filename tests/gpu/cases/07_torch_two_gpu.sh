#!/usr/bin/env bash
# (g) No false positive on a correct two-GPU PyTorch + Triton job under
# --mode abort --scope all: exit 0, "torch_two_gpu: ok", 0 crossings.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 2 "a job over two devices (copies and layers between them)"
need_files "$CTXGUARD" examples/torch_two_gpu.py
"$PYTHON" -c 'import torch, triton' >/dev/null 2>&1 || skip "$PYTHON cannot import torch and triton"
export TRITON_CACHE_DIR=$TMP/triton    # compile afresh, under the shim
run torch "$CTXGUARD" --mode abort --scope all --error-exitcode 86 -- "$PYTHON" examples/torch_two_gpu.py
show torch
[[ $STATUS != 86 ]] || fail "ctxguard reported a crossing"
[[ $STATUS != 77 ]] || skip "$(tail -n 1 "$TMP/torch.out")"
expect_status 0
grep -q '^torch_two_gpu: ok$' "$TMP/torch.out" || fail "the job's checks did not pass"
expect_zero_crossings torch
pass "two-GPU torch job clean under --scope all"
