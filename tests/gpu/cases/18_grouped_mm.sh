#!/usr/bin/env bash
# (r) The bundled grouped_mm kernels, as shipped: embedded in
# libctxguard.so, called through its ctypes entry points, against a float64
# reference on fresh random inputs (tests/gpu/test_grouped_mm.py), on the
# Hopper path and on the portable path, in the offs, contiguous, psum and
# masked forms.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 1
need_files "$BUILD/libctxguard.so" tests/gpu/test_grouped_mm.py
need_python torch
CG_GMM_LIB="$BUILD/libctxguard.so" timeout 500 "$PYTHON" tests/gpu/test_grouped_mm.py >"$TMP/gmm.log" 2>&1
st=$?
grep -E '^not ok|passed' "$TMP/gmm.log"
[ "$st" -eq 0 ] || { tail -n 40 "$TMP/gmm.log"; fail "grouped_mm correctness (exit $st)"; }
pass "grouped_mm kernels correct through libctxguard.so"
