#!/usr/bin/env bash
# (issue 60) Several contexts on one device: ctxguard's verdict equals the
# driver's.  Each row of tests/gpu/ctx_table.c runs plainly (the driver's
# verdict: accepted and right, or refused / wrong), then under
# `--mode warn --scope all` (a crossing must be reported exactly where the
# driver refuses or computes wrongly, and the result must not change), and,
# where the driver accepts, under `--mode abort --scope all` (must run to the
# end, result right).  The table printed is the one docs/contexts.md records.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 1
PROBE=$BUILD/gpu/ctx_table
PTX=$BUILD/gpu/ctx_table.ptx
need_files "$CTXGUARD" "$PROBE" "$PTX"

bad=0
printf '%-34s %-44s %-9s %s\n' row driver crossing verdict
while read -r row; do
	"$PROBE" "$PTX" "$row" >"$TMP/plain.out" 2>"$TMP/plain.err"
	st=$?
	if (( st == 3 )); then
		printf '%-34s %s\n' "$row" "not measurable on this device: $(cut -d' ' -f2- "$TMP/plain.out")"
		continue
	fi
	if (( st != 0 )); then
		echo "$row: the probe could not set up (exit $st): $(tail -n 1 "$TMP/plain.err")"
		bad=1
		continue
	fi
	plain=$(cut -d' ' -f2- "$TMP/plain.out")
	accepted=0
	[[ $plain == "launch=CUDA_SUCCESS sync=CUDA_SUCCESS result=right" ]] && accepted=1
	"$CTXGUARD" --mode warn --scope all --quiet --log "$TMP/warn.jsonl" -- \
		"$PROBE" "$PTX" "$row" >"$TMP/warn.out" 2>"$TMP/warn.err"
	crossings=$(grep -c '"event":"crossing"' "$TMP/warn.jsonl" 2>/dev/null)
	rm -f "$TMP/warn.jsonl"
	warned=$(cut -d' ' -f2- "$TMP/warn.out")
	verdict=agree
	if (( accepted && crossings > 0 )); then
		verdict="FALSE CROSSING"
	elif (( !accepted && crossings == 0 )); then
		verdict="MISSED"
	elif [[ $warned != "$plain" ]]; then
		verdict="CHANGED: $warned"
	elif (( accepted )); then
		"$CTXGUARD" --mode abort --scope all --quiet -- "$PROBE" "$PTX" "$row" >"$TMP/abort.out" 2>"$TMP/abort.err"
		st=$?
		[[ $st == 0 && $(cut -d' ' -f2- "$TMP/abort.out") == "$plain" ]] ||
			verdict="ABORT MODE: exit $st $(tail -n 1 "$TMP/abort.err")"
	fi
	printf '%-34s %-44s %-9s %s\n' "$row" "${plain//launch=/}" "$crossings" "$verdict"
	[[ $verdict == agree ]] || { bad=1; sed 's/^/    /' "$TMP/warn.err" | head -n 5; }
done < <("$PROBE" "$PTX" list)
# The other answers the context map and the redirect's ordering rely on.
"$PROBE" "$PTX" facts >"$TMP/facts.out" 2>&1 || { cat "$TMP/facts.out"; bad=1; }
cat "$TMP/facts.out"
grep -q '^fact [a-z_0-9]* no' "$TMP/facts.out" && bad=1
(( bad == 0 )) || fail "ctxguard's verdict differs from the driver's (rows above)"
pass "every row: a crossing reported exactly where the driver refuses or computes wrongly"
