#!/usr/bin/env bash
# The ops under --mode redirect --audit.  ctxguard readies its bundled
# kernels for a redirect (at the program's first module load) before the
# ops' first call; the ops' launches must still pass the hooks (they once
# shared the redirect's table of real driver functions, which the backstop
# counted as unhooked, failing the audit).  Every summary: unhooked 0.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/cupti.sh
. "$(dirname "$0")/../cupti.sh"
# shellcheck source=tests/gpu/pip.sh
. "$(dirname "$0")/../pip.sh"
need_gpus 1
need_python torch
use_torch_cupti
pip_env reuse
script='
import torch, ctxguard
torch.manual_seed(0)
a = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
w = torch.randn(4, 384, 256, device="cuda", dtype=torch.bfloat16)
offs = torch.tensor([100, 200, 400, 512], device="cuda", dtype=torch.int32)
ref = torch._grouped_mm(a, w.transpose(-2, -1), offs=offs).float()
got = ctxguard.grouped_mm(a, w.transpose(-2, -1), offs).float()
err = ((got - ref).norm() / ref.norm()).item()
assert err < 1e-2, err
print("ops_redirect_audit: ok")
'
run ops "$PIP_BIN/ctxguard" --mode redirect --audit --scope all --error-exitcode 86 \
	--log "$TMP/ops.%p.jsonl" -- "$PIP_PY" -c "$script"
show ops
if ! (
	expect_backstop_on ops
	summaries=$(grep -E '^ctxguard: pid [0-9]+:' "$TMP/ops.err")
	[[ -n $summaries ]] || fail "no summary line"
	grep -vqE '; backstop: unhooked 0$' <<<"$summaries" && fail "a summary without 'backstop: unhooked 0'"
	echo "every summary says backstop: unhooked 0"
); then
	evidence ops
	exit 1
fi
expect_clean ops "ops_redirect_audit: ok"
pass "the ops under --mode redirect --audit: unhooked 0, zero crossings"
