#!/bin/sh
# Makes sure the test suite's tools are installed: Debian's `check` (the
# unit-test framework, needed to build the suites) and kubernetes-validate
# (one check validates the Kubernetes manifests against the schemas it ships)
# and jsonschema (the log records against docs/log-schema.json).
set -e
# pip_install PACKAGE FOR CHECK: installs PACKAGE (pip) for FOR, or says
# that CHECK fails until it is installed.
pip_install() {
	echo "ctxguard: installing $1 (pip) for $2..." >&2
	python3 -m pip install --quiet --disable-pip-version-check --retries 0 --timeout 10 \
		"$1" >/dev/null 2>&1 ||
		echo "ctxguard: could not install it; $3 will fail until" \
			"you run: python3 -m pip install $1" >&2
}
command -v kubernetes-validate >/dev/null 2>&1 ||
	pip_install kubernetes-validate "the manifests' check" "the check kubernetes_manifests_validate"
# jsonschema: the log records' check (tests/log_schema.py)
python3 -c 'import jsonschema' >/dev/null 2>&1 ||
	pip_install jsonschema "the log records' check" "the log schema check"
if pkg-config --exists check 2>/dev/null; then
	exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "ctxguard: installing Debian's check (the test framework)..." >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q check pkg-config >/dev/null 2>&1 ||
		{ apt-get update -q >/dev/null && apt-get install -y -q check pkg-config >/dev/null; }
	pkg-config --exists check && exit 0
fi
echo "ctxguard: the test suite needs Debian's check; run: sudo apt-get install check pkg-config" >&2
exit 1
