# shellcheck shell=bash
# Helpers for the GPU suite, sourced by tests/gpu/run.sh and by every
# tests/gpu/cases/*.sh.  A case runs alone as well as under run.sh:
#   tests/gpu/cases/03_cross_abort.sh        (from anywhere; BUILD=build by default)
# Case protocol: exit 0 = pass, 77 = skip (last line says why), else fail;
# whatever the case prints is its evidence.

cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1   # repository root

BUILD=${BUILD:-build}
CTXGUARD=${CTXGUARD:-$BUILD/ctxguard}
ROUTE=${ROUTE:-$BUILD/examples/deepgemm_route}
CUBIN=${CUBIN:-$BUILD/gpu/deepgemm_abi.cubin}
PYTHON=${PYTHON:-python3}

# The line transformers raises (src/transformers/integrations/deepgemm.py);
# ctxguard must print it verbatim.
DEEPGEMM_MESSAGE=$(cat <<'EOF'
DeepGEMM experts selected on a model spanning multiple CUDA devices in one process; its kernels are bound to a single CUDA context and corrupt across devices. Use `experts_implementation='grouped_mm'`, or run one device per process (TP/EP).
EOF
)

# Cases start from a clean slate: no inherited preload or ctxguard settings,
# no core files from the abort cases.  CTXGUARD_CACHE (where deepgemm.sh
# keeps its build) is the suite's, not ctxguard's.
unset LD_PRELOAD
for _v in "${!CTXGUARD_@}"; do [[ $_v == CTXGUARD_CACHE ]] || unset "$_v"; done
unset _v
ulimit -c 0

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ctxguard-gpu.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

# Visible GPUs: 0 without nvidia-smi; CUDA_VISIBLE_DEVICES narrows the count.
gpu_count() {
	local n
	command -v nvidia-smi >/dev/null 2>&1 || { echo 0; return; }
	n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
	if [[ -v CUDA_VISIBLE_DEVICES ]]; then
		local -a vis
		IFS=, read -r -a vis <<<"$CUDA_VISIBLE_DEVICES"
		(( ${#vis[@]} < n )) && n=${#vis[@]}
	fi
	echo "$n"
}

pass() { echo "PASS: $*"; exit 0; }
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

# need_gpus N [WHY]: skips with fewer than N visible GPUs, saying why one
# GPU cannot show the case's point when WHY is given.
need_gpus() {
	local have
	have=$(gpu_count)
	(( have >= $1 )) || skip "needs $1 GPU(s), $have visible${2:+: $2}"
}

# Why the silent crossings (kind b: an operand on another device) need two
# GPUs: a second context on the same device has its memory there.
# shellcheck disable=SC2034  # the cases' to use
OPERAND_ON_ANOTHER_DEVICE="an operand on another device needs a second device (memory of a context created on device 0 is device 0's, and the driver accepts it there)"

# second_context: SECOND, the option that gives the route programs
# (deepgemm_route, deepgemm_redirect, unhooked_route, deepgemm_torch.py) the
# second context of a handle crossing: () for device 1's primary context
# where two GPUs are visible, (--created) for a context cuCtxCreate makes on
# device 0 where one is: the driver refuses a function of one context in
# another of the same device (400) as across devices.  SECOND_CONTEXT=created
# or device1 chooses (created runs the one-GPU twins on a larger machine).
SECOND=()
second_context() {
	case ${SECOND_CONTEXT:-auto} in
	created) need_gpus 1; SECOND=(--created) ;;
	device1) need_gpus 2; SECOND=() ;;
	auto) need_gpus 1; if (( $(gpu_count) >= 2 )); then SECOND=(); else SECOND=(--created); fi ;;
	*) fail "SECOND_CONTEXT=$SECOND_CONTEXT: expected created or device1" ;;
	esac
	if (( ${#SECOND[@]} )); then
		echo "second context: a context created on device 0 (--created)"
	else
		echo "second context: device 1's primary context"
	fi
}

# expect_both_contexts DIAG: ctxguard's report names the owner and the
# launch context: devices 0 and 1, or, with a created context, two
# different contexts on device 0.
expect_both_contexts() {
	local owner launch
	if (( ${#SECOND[@]} == 0 )); then
		grep -qiE "$(device_re 0)" "$1" || fail "diagnostics do not name device 0"
		grep -qiE "$(device_re 1)" "$1" || fail "diagnostics do not name device 1"
		return 0
	fi
	owner=$(grep -m 1 -oE '^ctxguard: owner: context 0x[0-9a-f]+ on device 0' "$1" | grep -oE '0x[0-9a-f]+')
	launch=$(grep -m 1 -oE '^ctxguard: launch: context 0x[0-9a-f]+ on device 0' "$1" | grep -oE '0x[0-9a-f]+')
	[[ -n $owner && -n $launch ]] || fail "diagnostics do not name an owner and a launch context on device 0"
	[[ $owner != "$launch" ]] || fail "owner and launch context are the same ($owner)"
	echo "owner context $owner, launch context $launch, both on device 0"
}

need_files() {
	local f
	for f; do
		[[ -e $f ]] || fail "$f is missing (make; make -f tests/gpu/gpu.mk BUILD=$BUILD)"
	done
}

# run NAME CMD...: stdout -> $TMP/NAME.out, stderr -> $TMP/NAME.err, status -> STATUS.
run() {
	local name=$1
	shift
	echo "\$ $*"
	"$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
	STATUS=$?
	echo "exit status $STATUS$( ((STATUS > 128)) && echo " (signal $((STATUS - 128)))")"
}

# show NAME: the captured streams, trimmed, as evidence.
show() {
	local s
	for s in out err; do
		[[ -s $TMP/$1.$s ]] || continue
		echo "--- std$s"
		head -n 40 "$TMP/$1.$s"
	done
	echo "---"
}

expect_status() {
	[[ $STATUS == "$1" ]] || fail "expected exit status $1, got $STATUS"
}

# deepgemm_route exits 5 when the machine cannot reproduce the case.
skip_if_unreproducible() {
	[[ $STATUS != 5 ]] || skip "deepgemm_route: $(tail -n 1 "$TMP/$1.out")"
}

# A ctxguard diagnostic line naming device N (device 0, dev=0, GPU0, cuda:0...).
device_re() {
	echo "(device|dev|gpu|cuda:?)[[:space:]#=:]*$1([^0-9]|\$)"
}

# expect_abort_report NAME: killed by SIGABRT, stderr's first line is exactly
# the DeepGEMM message, then "ctxguard:" lines naming the fixture kernel.
expect_abort_report() {
	local first
	expect_status 134
	first=$(head -n 1 "$TMP/$1.err")
	[[ $first == "$DEEPGEMM_MESSAGE" ]] ||
		fail "first stderr line is not the documented message: '$first'"
	grep '^ctxguard: ' "$TMP/$1.err" >"$TMP/$1.diag"
	grep -q 'sm90_bf16_gemm_impl' "$TMP/$1.diag" || fail "ctxguard diagnostics do not name the kernel"
}

# expect_zero_crossings NAME: at least one "ctxguard: pid P: ..." summary on
# stderr, and every crossing count in them is 0 ("0 crossings", "crossings: 0").
expect_zero_crossings() {
	local lines counts
	lines=$(grep -E '^ctxguard: pid [0-9]+:.*crossing' "$TMP/$1.err")
	[[ -n $lines ]] || fail "no ctxguard summary line on stderr"
	echo "summary: $lines"
	counts=$(grep -oiE '[0-9]+ crossings?|crossings?[[:space:]:=]+[0-9]+' <<<"$lines" | grep -oE '[0-9]+')
	[[ -n $counts ]] || fail "summary line has no crossing count"
	grep -qv '^0$' <<<"$counts" && fail "summary reports crossings"
	return 0
}

# need_python MODULE...: skip unless $PYTHON imports every module.
need_python() {
	local m
	for m; do
		"$PYTHON" -c "import $m" >/dev/null 2>&1 || skip "$PYTHON cannot import $m"
	done
}

# need_deepgemm: the real DeepGEMM, built from its public source by
# tests/gpu/deepgemm.sh (cached outside the repo), importable from here on
# (PYTHONPATH, DEEPGEMM_PATH, LD_PRELOAD of the system libstdc++,
# DG_JIT_CACHE_DIR exported); skips with the script's reason otherwise.
# Its LD_PRELOAD stays first: ctxguard appends its own library.
need_deepgemm() {
	local env
	env=$(tests/gpu/deepgemm.sh 2>"$TMP/deepgemm.log") || {
		sed 's/^/  /' "$TMP/deepgemm.log"
		skip "$(tail -n 1 "$TMP/deepgemm.log")"
	}
	grep '^deepgemm.sh: ' "$TMP/deepgemm.log" | tail -n 1
	eval "$env"
}

# expect_shadowed NAME CALLS [REFUSED]: the verdict on a run under --shadow,
#   run NAME "$CTXGUARD" --shadow ... --log "$TMP/NAME.%p.jsonl" -- PROGRAM
# that made CALLS DeepGEMM GEMM launches: exit 0; the exit summary's
# "shadowed N, mismatched M, undecodable K" (summed over its processes) with
# N >= CALLS and M = 0; no
# "shadow" log record of a mismatch, nor an undecodable GEMM (a DeepGEMM
# kernel that is no GEMM, transpose_fp32, has no bundled twin: listed, not
# failed; nor a GEMM whose reason matches the extended regex REFUSED, a
# launch the redirect documents it refuses: listed with the reason).
# Prints the count and the worst error per (dtype, layout).
expect_shadowed() {
	local summary
	summary=$(grep -aoE 'shadowed [0-9]+, mismatched [0-9]+, undecodable [0-9]+' "$TMP/$1.err")
	echo "summary: ${summary:-none}" | paste -sd';'
	if (
		expect_status 0
		[[ -n $summary ]] || fail "no 'shadowed N, mismatched M, undecodable K' on stderr"
		"$PYTHON" - "$2" "$summary" "${3:-}" "$TMP/$1".*.jsonl <<'PY' || fail "shadow verdict (above)"
import collections, json, re, sys
calls, summary, refusable, logs = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
# One summary per process (DeepGEMM's JIT runs nvcc under the preload too): summed.
counts = re.findall(r"shadowed (\d+), mismatched (\d+), undecodable (\d+)", summary)
shadowed, mismatched, undecodable = (sum(int(c[i]) for c in counts) for i in range(3))
recs = [r for f in logs for r in map(json.loads, open(f)) if r.get("event") == "shadow"]
worst, count, bad, other = collections.defaultdict(float), collections.Counter(), [], collections.Counter()
refused = collections.Counter()
for r in recs:
    form = "%s %s" % (r.get("dtype"), r.get("layout"))
    if r.get("result") == "match":
        count[form] += 1
        worst[form] = max(worst[form], float(r.get("max_rel_err") or 0))
    elif r.get("result") == "undecodable" and not re.search(r"_gemm_(1d2d_)?impl", str(r.get("kernel"))):
        other[r.get("kernel")] += 1
    elif r.get("result") == "undecodable" and refusable and re.search(refusable, str(r.get("reason"))):
        refused[r.get("reason")] += 1
    else:
        bad.append(r)
for form in sorted(count):
    print("  %-28s %5d shadowed launches, worst rel error %.2e" % (form, count[form], worst[form]))
for kernel, n in other.items():
    print("  not a GEMM, no bundled twin (%d launches): %s" % (n, kernel))
for reason, n in refused.items():
    print("  refused by the decode, as documented (%d launches): %s" % (n, reason))
for r in bad[:10]:
    print("  %s %s: %s %s, rel error %s (tolerance %s): %s" % (
        r.get("result"), r.get("kernel"), r.get("dtype"), r.get("layout"), r.get("max_rel_err"),
        r.get("tolerance"), r.get("reason")))
if not count:
    print("  no 'match' records: the log gives no error per form")
why = []
if shadowed + sum(refused.values()) < calls:
    why.append("shadowed %d launches (and %d refused), the program made %d GEMM calls"
               % (shadowed, sum(refused.values()), calls))
if mismatched:
    why.append("the summary counts %d mismatched" % mismatched)
if bad:
    why.append("%d GEMM launch(es) mismatched or not decoded (records above)" % len(bad))
print("; ".join(why) or "every GEMM launch shadowed and matched")
sys.exit(1 if why else 0)
PY
	); then
		return 0
	fi
	evidence "$1"
	exit 1
}

# need_shadow: this ctxguard has --shadow.
need_shadow() {
	"$CTXGUARD" --help 2>&1 | grep -q -- '--shadow' || fail "$CTXGUARD has no --shadow option"
}

# evidence NAME: what it takes to judge a ctxguard verdict from the output
# alone: every ctxguard line on stderr (reports, summaries), the end of
# stderr (a traceback), and for each JSON log $TMP/NAME.*.jsonl its crossing
# records and last lines (the summary, with per-entry-point call counts).
evidence() {
	local f
	echo "--- ctxguard lines on stderr"
	grep -aE '^(ctxguard|DeepGEMM experts selected)' "$TMP/$1.err" | head -n 200
	echo "--- end of stderr"
	tail -n 40 "$TMP/$1.err"
	for f in "$TMP/$1".*.jsonl; do
		[[ -e $f ]] || continue
		echo "--- log ${f##*/}: crossing records, then its last lines"
		grep -a '"event":"crossing"' "$f" | head -n 20
		tail -n 3 "$f"
	done
	echo "---"
}

# expect_clean NAME OKLINE: the verdict on a correct program run as
#   run NAME "$CTXGUARD" --mode abort --scope all --error-exitcode 86 \
#       --log "$TMP/NAME.%p.jsonl" -- PROGRAM...
# 77 skips; otherwise exit 0, OKLINE alone on a stdout line, some process
# checked launches, and every summary line says 0 crossings.  Any crossing in
# a correct program is a ctxguard bug until proven otherwise, so a failure
# prints the evidence before failing.
expect_clean() {
	[[ $STATUS != 77 ]] || skip "$(tail -n 1 "$TMP/$1.out")"
	if (
		[[ $STATUS != 86 ]] || fail "ctxguard reported a crossing (--error-exitcode 86)"
		expect_status 0
		grep -qxF -- "$2" "$TMP/$1.out" || fail "no '$2' line on stdout: the program's own checks failed"
		expect_zero_crossings "$1"
		grep -oE '[0-9]+ launch(es)? checked' "$TMP/$1.err" | grep -qv '^0 ' ||
			fail "no process checked a launch: ctxguard saw none of the program's kernels"
	); then
		return 0
	fi
	evidence "$1"
	exit 1
}
