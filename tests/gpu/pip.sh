# shellcheck shell=bash
# The installed package for the GPU cases 60-64, sourced after lib.sh:
#   pip_env [fresh]   builds the wheel from this tree with the machine's
#                     setuptools (pip install --no-build-isolation: no
#                     network) into a venv at $BUILD/pip/venv that sees the
#                     system's torch and transformers; reused by later cases
#                     unless "fresh".  Sets PIP_PY (the venv's python) and
#                     PIP_BIN (its bin/, where the ctxguard command is).
PIP_VENV=$BUILD/pip/venv
PIP_PY=$PIP_VENV/bin/python
PIP_BIN=$PIP_VENV/bin

pip_env() {
	if [[ $1 == fresh || ! -x $PIP_BIN/ctxguard ]]; then
		rm -rf "$BUILD/pip"
		"$PYTHON" -m venv --system-site-packages "$PIP_VENV" >"$TMP/venv.log" 2>&1 ||
			{ cat "$TMP/venv.log"; fail "python -m venv failed"; }
		echo "\$ pip install --no-build-isolation --no-deps . (into $PIP_VENV)"
		if ! "$PIP_PY" -m pip install --no-build-isolation --no-deps . >"$TMP/pip.log" 2>&1; then
			tail -n 60 "$TMP/pip.log"
			fail "pip install --no-build-isolation . failed"
		fi
		grep -E 'Successfully|kernels:' "$TMP/pip.log"
	fi
	return 0
}
