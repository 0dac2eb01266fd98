# shellcheck shell=bash
# The installed package for the GPU cases 60-65, sourced after lib.sh:
#   pip_env fresh|reuse  installs this tree with the machine's setuptools
#                     (pip install --no-build-isolation: no network) into a
#                     venv at $BUILD/pip/venv that sees the system's torch and
#                     transformers; "reuse" keeps an earlier case's install.
#                     PIP_PY: the venv's python; PIP_BIN: its bin/ (ctxguard).
PIP_VENV=$(realpath -m "$BUILD")/pip/venv
PIP_PY=$PIP_VENV/bin/python
PIP_BIN=$PIP_VENV/bin

pip_env() {
	if [[ $1 == fresh || ! -x $PIP_BIN/ctxguard ]]; then
		rm -rf "$BUILD/pip"
		"$PYTHON" -m venv --system-site-packages "$PIP_VENV" >"$TMP/venv.log" 2>&1 ||
			{ cat "$TMP/venv.log"; fail "python -m venv failed"; }
		# The machine's python may itself be a venv (torch lives in it), whose
		# packages --system-site-packages does not reach: a .pth adds them,
		# after the new venv's own.
		"$PYTHON" -c 'import site; print("\n".join(site.getsitepackages()))' \
			>"$("$PIP_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/machine.pth" ||
			fail "cannot list the machine python's site-packages"
		echo "\$ pip install --no-build-isolation --no-deps . (into $PIP_VENV)"
		if ! "$PIP_PY" -m pip install --no-build-isolation --no-deps . >"$TMP/pip.log" 2>&1; then
			tail -n 60 "$TMP/pip.log"
			fail "pip install --no-build-isolation . failed"
		fi
		grep -E 'Successfully|kernels:' "$TMP/pip.log"
	fi
	return 0
}

# pip_test_ops PART: tests/gpu/test_ops.py PART with the venv's python under
# its ctxguard command (--mode abort --scope all): checks pass, 0 crossings.
pip_test_ops() {
	export TRITON_CACHE_DIR=$TMP/triton TORCHINDUCTOR_CACHE_DIR=$TMP/inductor
	run ops "$PIP_BIN/ctxguard" --mode abort --scope all --error-exitcode 86 --log "$TMP/ops.%p.jsonl" -- \
		"$PIP_PY" tests/gpu/test_ops.py "$1"
	cat "$TMP/ops.out"
	expect_clean ops "test_ops: ok"
}
