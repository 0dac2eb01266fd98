#!/usr/bin/env bash
# Builds the real DeepGEMM from its public source, once, outside the repo,
# and prints the lines that make it importable:
#   eval "$(tests/gpu/deepgemm.sh)"      # exports PYTHONPATH, DEEPGEMM_PATH,
#                                        # LD_PRELOAD, DG_JIT_CACHE_DIR
# Exit 0 with those lines on stdout; exit 77 when it cannot be built or
# imported here, the reason as stderr's last line (progress goes to stderr).
#
# The commits (DESIGN.md, "Building the real DeepGEMM on a GPU machine"):
DG_COMMIT=54e22612409371d6364144b69086735beb54e98b
CUTLASS_COMMIT=f3fde58372d33e9a5650ba7b80fc48b3b49d40c8
FMT_COMMIT=553ec11ec06fbe0beebfbb45f9dc3c9eabd83d28
# Sources, the first that exists:
#   $DEEPGEMM_SRC             a .tgz, or a directory, holding the assembled tree
#                             (DeepGEMM with third-party/{cutlass,fmt}/include)
#   .dgsrc/deepgemm-src.tgz   at the repository root (git-ignored)
#   git clone of the three repositories at those commits (network)
# Cache: ${CTXGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ctxguard}/deepgemm-54e2261
#   src/   the tree, built in place (deep_gemm/_C*.so)
#   jit/   DeepGEMM's JIT cache (later runs start in seconds)
#   stamp  the Python and torch it was built against; another rebuilds
# DeepGEMM's source and binaries never enter the repository.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd) || exit 1
PYTHON=${PYTHON:-python3}
CACHE=${CTXGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ctxguard}/deepgemm-${DG_COMMIT:0:7}
SRC=$CACHE/src
JIT=$CACHE/jit

say() { echo "deepgemm.sh: $*" >&2; }
cannot() { say "cannot use DeepGEMM: $*"; exit 77; }

# The system libstdc++ (DeepGEMM's iostream/regex code crashed under the
# GPU machine's torch without it), as the dynamic linker's cache lists it.
libstdcxx() {
	local arch=x86-64
	[[ $(uname -m) == aarch64 ]] && arch=AArch64
	ldconfig -p 2>/dev/null | awk -v a="$arch" '$1 == "libstdc++.so.6" && index($0, a) { print $NF; exit }'
}

# The environment the build and every user of it run in.
preload=$(libstdcxx)
[[ -n $preload ]] || cannot "ldconfig -p lists no libstdc++.so.6"
with_env() {
	PYTHONPATH=$SRC${PYTHONPATH:+:$PYTHONPATH} DG_JIT_CACHE_DIR=$JIT \
		LD_PRELOAD=$preload${LD_PRELOAD:+:$LD_PRELOAD} "$@"
}

torch_id() {
	"$PYTHON" -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)' 2>/dev/null
}

# unpack ARCHIVE_OR_DIR: the tree into $SRC.new (the folder with setup.py
# and deep_gemm/ inside an archive's first level or two).
unpack() {
	local top
	rm -rf "$SRC.new" "$CACHE/unpack" && mkdir -p "$CACHE/unpack" || return 1
	if [[ -d $1 ]]; then
		cp -a "$1/." "$CACHE/unpack/" || return 1
	else
		tar -xzf "$1" -C "$CACHE/unpack" || return 1
	fi
	top=$(find "$CACHE/unpack" -maxdepth 2 -name setup.py -printf '%h\n' | head -n 1)
	[[ -n $top && -d $top/deep_gemm ]] || { say "$1 holds no DeepGEMM tree"; return 1; }
	mv "$top" "$SRC.new" && rm -rf "$CACHE/unpack"
}

# clone URL COMMIT DIR [SPARSE_PATH]: one commit, only SPARSE_PATH's files.
clone() {
	git init -q "$3" && git -C "$3" remote add origin "$1" || return 1
	if [[ -n ${4:-} ]]; then
		git -C "$3" sparse-checkout set --no-cone "/$4/" || return 1
	fi
	git -C "$3" fetch -q --depth 1 --filter=blob:none origin "$2" && git -C "$3" checkout -q FETCH_HEAD
}

fetch_git() {
	command -v git >/dev/null || { say "no git"; return 1; }
	local t=$CACHE/clone
	rm -rf "$t" "$SRC.new" && mkdir -p "$t" || return 1
	clone https://github.com/deepseek-ai/DeepGEMM.git "$DG_COMMIT" "$t/dg" &&
		clone https://github.com/NVIDIA/cutlass.git "$CUTLASS_COMMIT" "$t/cutlass" include &&
		clone https://github.com/fmtlib/fmt.git "$FMT_COMMIT" "$t/fmt" include || return 1
	rm -rf "$t/dg/.git" "$t/dg/third-party/cutlass" "$t/dg/third-party/fmt"
	mkdir -p "$t/dg/third-party/cutlass" "$t/dg/third-party/fmt"
	mv "$t/cutlass/include" "$t/dg/third-party/cutlass/" && mv "$t/fmt/include" "$t/dg/third-party/fmt/" &&
		mv "$t/dg" "$SRC.new" && rm -rf "$t"
}

get_source() {
	if [[ -n ${DEEPGEMM_SRC:-} ]]; then
		[[ -e $DEEPGEMM_SRC ]] || { say "DEEPGEMM_SRC=$DEEPGEMM_SRC does not exist"; return 1; }
		say "source: $DEEPGEMM_SRC"
		unpack "$DEEPGEMM_SRC"
	elif [[ -f $ROOT/.dgsrc/deepgemm-src.tgz ]]; then
		say "source: $ROOT/.dgsrc/deepgemm-src.tgz"
		unpack "$ROOT/.dgsrc/deepgemm-src.tgz"
	else
		say "source: git clone of DeepGEMM ${DG_COMMIT:0:7}, cutlass ${CUTLASS_COMMIT:0:7}, fmt ${FMT_COMMIT:0:7}"
		fetch_git
	fi
}

# setup.py imports wheel.bdist_wheel for a command build_ext does not run;
# without the wheel package (nothing can be installed on the GPU machine) a
# command of that name that refuses to run stands in for it, for the build.
wheel_stand_in() {
	"$PYTHON" -c 'import wheel.bdist_wheel' 2>/dev/null && return
	mkdir -p "$CACHE/stand-in/wheel" || return
	: >"$CACHE/stand-in/wheel/__init__.py"
	cat >"$CACHE/stand-in/wheel/bdist_wheel.py" <<'PY'
from setuptools import Command


class bdist_wheel(Command):
    user_options = []

    def initialize_options(self):
        pass

    def finalize_options(self):
        pass

    def run(self):
        raise SystemExit("bdist_wheel needs the wheel package")
PY
	echo "$CACHE/stand-in"
}

build() {
	local t0=$SECONDS stand_in
	[[ -d $SRC/deep_gemm ]] || {
		get_source || return 1
		rm -rf "$SRC" && mv "$SRC.new" "$SRC" || return 1
	}
	local d
	for d in cutlass fmt; do
		[[ -d $SRC/third-party/$d/include ]] || { say "the tree lacks third-party/$d/include"; return 1; }
	done
	# The JIT passes only -I deep_gemm/include to nvcc (build_py would copy these).
	for d in cute cutlass; do
		ln -sfn "../../third-party/cutlass/include/$d" "$SRC/deep_gemm/include/$d" || return 1
	done
	rm -f "$SRC"/deep_gemm/_C*.so
	say "building deep_gemm._C in $SRC (about 80 s on 16 cores)"
	stand_in=$(wheel_stand_in)
	(cd "$SRC" && with_env env DG_USE_LOCAL_VERSION=0 MAX_JOBS="$(nproc)" \
		PYTHONPATH="$SRC${stand_in:+:$stand_in}${PYTHONPATH:+:$PYTHONPATH}" \
		"$PYTHON" setup.py build_ext --inplace) >"$CACHE/build.log" 2>&1 ||
		{ tail -n 30 "$CACHE/build.log" >&2; say "build failed, log: $CACHE/build.log"; return 1; }
	say "built in $((SECONDS - t0)) s"
}

mkdir -p "$CACHE" "$JIT" || cannot "cannot create $CACHE"
command -v "$PYTHON" >/dev/null || cannot "no $PYTHON"
id=$(torch_id) || cannot "$PYTHON cannot import torch"
# One build at a time; a second caller waits and reuses it.
exec 9>"$CACHE/lock"
if command -v flock >/dev/null; then
	flock 9 || cannot "cannot lock $CACHE/lock"
fi
if [[ $(cat "$CACHE/stamp" 2>/dev/null) != "$id" ]] || ! compgen -G "$SRC/deep_gemm/_C*.so" >/dev/null; then
	rm -f "$CACHE/stamp"
	build || cannot "no build (see above)"
	echo "$id" >"$CACHE/stamp"
fi
exec 9>&-
with_env "$PYTHON" -c 'import deep_gemm' >"$CACHE/import.log" 2>&1 ||
	{ tail -n 5 "$CACHE/import.log" >&2; cannot "import deep_gemm failed: $(tail -n 1 "$CACHE/import.log")"; }
say "deep_gemm ${DG_COMMIT:0:7} ready in $SRC"
printf 'export PYTHONPATH=%q\n' "$SRC${PYTHONPATH:+:$PYTHONPATH}"
printf 'export DEEPGEMM_PATH=%q\n' "$SRC"
printf 'export DG_JIT_CACHE_DIR=%q\n' "$JIT"
printf 'export LD_PRELOAD=%q\n' "$preload${LD_PRELOAD:+:$LD_PRELOAD}"
