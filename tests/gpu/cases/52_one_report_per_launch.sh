#!/usr/bin/env bash
# One crossing launch is one report: DeepGEMM's silent route (grouped_layout
# and the TMA descriptors on device 1, launch on device 0) under --mode warn
# with --log prints one report block per crossing launch, listing every
# operand on the other device, and logs one record per launch with
# noperands >= 2; the summary counts launches, not operands.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 2 "$OPERAND_ON_ANOTHER_DEVICE"
need_files "$CTXGUARD" "$ROUTE" "$CUBIN"
run warn "$CTXGUARD" --mode warn --log "$TMP/warn.%p.jsonl" -- "$ROUTE" silent "$CUBIN"
show warn
skip_if_unreproducible warn
evidence warn
reports=$(grep -c '^ctxguard: cross-context launch allowed (warn)' "$TMP/warn.err")
operands=$(grep -c '^ctxguard: operand: parameter ' "$TMP/warn.err")
records=$(cat "$TMP"/warn.*.jsonl | grep -c '"event":"crossing"')
summary=$(grep -E '^ctxguard: pid [0-9]+:.* crossings? \(' "$TMP/warn.err" | grep -v ' 0 crossings (')
echo "reports $reports, operand lines $operands, crossing records $records; summary: $summary"
(( reports >= 1 )) || fail "no crossing reported"
(( records == reports )) || fail "$records records for $reports reports"
(( operands >= 2 * reports )) || fail "the reports list fewer than two operands each"
# Past 8 reports per kernel crossings are counted, not printed.
warned=$(grep -oE 'warn [0-9]+' <<<"$summary" | head -n 1 | grep -oE '[0-9]+')
if (( reports < 8 )); then
	[[ $warned == "$reports" ]] || fail "the summary counts ${warned:-no} crossing(s) for $reports launch(es)"
else
	(( warned >= reports )) || fail "the summary counts ${warned:-no} crossing(s) for $reports reports"
fi
"$PYTHON" - "$TMP"/warn.*.jsonl <<'PY' || fail "a crossing record does not list its operands"
import json, sys
recs = [r for f in sys.argv[1:] for r in map(json.loads, open(f)) if r["event"] == "crossing"]
for r in recs:
    ops = r.get("operands", [])
    print(r["kind"], r.get("noperands"), [(o["param"], o["addr_dev"], o["operand"]) for o in ops])
    if r["kind"] != "b" or r.get("noperands") != len(ops) or len(ops) < 2:
        sys.exit(1)
PY
pass "one report and one record per crossing launch, every operand listed"
