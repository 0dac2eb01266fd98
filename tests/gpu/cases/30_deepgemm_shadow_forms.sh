#!/usr/bin/env bash
# (issue 60) The real DeepGEMM (built by tests/gpu/deepgemm.sh) under
# --shadow, one GPU: m_grouped_{bf16,fp8}_gemm_nt_contiguous with mk
# alignment 128 and 64, their psum layout, m_grouped_{bf16,fp8}_gemm_nt_
# masked and the plain {bf16,fp8}_gemm_nt, on bench/bench_grouped_mm.py's
# shapes (tests/gpu/deepgemm_real.py forms: 14 JIT compiles;
# DEEPGEMM_FORMS=bench for every shape in every form, about 70).  Each call is checked against torch, and every GEMM launch is
# shadowed by the bundled kernel it would be redirected to: all decoded,
# none mismatched; the count and the worst error per form are printed.
# Alignment 64 makes DeepGEMM's contiguous kernels use BLOCK_M 64: those
# launches decode too, into the bundled kernels' 64-row blocks
# (CG_GMM_BLOCKS_64), and must match like the rest.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 1
need_files "$CTXGUARD" tests/gpu/deepgemm_real.py
need_python torch
need_shadow
need_deepgemm
run forms "$CTXGUARD" --shadow --mode abort --log "$TMP/forms.%p.jsonl" -- \
	"$PYTHON" tests/gpu/deepgemm_real.py forms "${DEEPGEMM_FORMS:-suite}"
show forms
[[ $STATUS != 5 ]] || skip "$(tail -n 1 "$TMP/forms.out")"
grep -q '^deepgemm_real: ok$' "$TMP/forms.out" || { evidence forms; fail "DeepGEMM's results are wrong against torch"; }
calls=$(grep -oE '^deepgemm_real: [0-9]+ GEMM calls' "$TMP/forms.out" | grep -oE '[0-9]+')
expect_shadowed forms "${calls:-1}"
pass "every DeepGEMM GEMM launch decoded and matched under --shadow"
