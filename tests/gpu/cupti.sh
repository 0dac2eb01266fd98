# shellcheck shell=bash
# Helpers for the CUPTI backstop's cases (40-42), sourced after lib.sh.

# need_cupti: a libcupti ctxguard can load, or skip.  Its own search sees
# the toolkit's extras/CUPTI/lib64 and the loader's path; one found only in
# Python's nvidia packages is named in CTXGUARD_CUPTI.
need_cupti() {
	local c
	for c in "${CUDA_HOME:-/usr/local/cuda}"/extras/CUPTI/lib64/libcupti.so*; do
		[[ -e $c ]] && { echo "libcupti: $c (the toolkit's)"; return 0; }
	done
	c=$(ldconfig -p 2>/dev/null | grep -oE '/[^ ]*libcupti\.so[.0-9]*$' | head -n 1)
	[[ -n $c ]] && { echo "libcupti: $c (on the loader's path)"; return 0; }
	c=$("$PYTHON" - 2>/dev/null <<'EOF'
import glob, os, site
for d in site.getsitepackages():
    for p in sorted(glob.glob(os.path.join(d, "nvidia", "**", "libcupti.so*"), recursive=True)):
        print(p)
        raise SystemExit
EOF
)
	[[ -n $c ]] || skip "no libcupti here (toolkit extras/CUPTI/lib64, loader's path, Python's nvidia packages)"
	export CTXGUARD_CUPTI=$c
	echo "libcupti: CTXGUARD_CUPTI=$c (from Python's nvidia packages)"
}

# use_torch_cupti: name the libcupti PyTorch itself loads, so that ctxguard
# and the profiler share one CUPTI (ctxguard prefers a loaded one anyway).
use_torch_cupti() {
	local c
	c=$("$PYTHON" - 2>/dev/null <<'EOF'
import torch
torch.zeros(1, device="cuda")
import torch.profiler  # noqa: F401  (Kineto, which brings CUPTI)
for line in open("/proc/self/maps"):
    if "libcupti.so" in line:
        print(line.split()[-1])
        break
EOF
)
	if [[ -n $c ]]; then
		export CTXGUARD_CUPTI=$c
		echo "libcupti: CTXGUARD_CUPTI=$c (the one PyTorch loads)"
	else
		need_cupti
	fi
}

# expect_backstop_on NAME: no process ran without the backstop.
expect_backstop_on() {
	if grep -q 'backstop off' "$TMP/$1.err"; then
		grep 'backstop off' "$TMP/$1.err" | head -n 3
		fail "the backstop did not watch (see the line above)"
	fi
}
