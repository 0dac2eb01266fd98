#!/usr/bin/env bash
# (issue 60) ctxguard --shadow on one GPU: each DeepGEMM-named fixture call
# (examples/deepgemm_redirect, situation same: everything on device 0, so
# nothing crosses) runs as made, then the bundled kernel a redirect would
# run takes the same operands on the same stream into a scratch D, and the
# two outputs are compared (docs/shadow.md).  For every (dtype, layout) the
# fixture instantiates, under mode abort and under mode redirect: the call
# is right (exit 0), the summary says mismatched 0, and the log has one
# "shadow" record per GEMM launch; every launch is shadowed and matches
# (a launch the decode refuses is listed with its reason, and fails the
# case: the fixture makes only launches DeepGEMM's host code makes).
# Without ctxguard's kernels (no nvcc) it skips.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/gpu/redirect.sh
. "$(dirname "$0")/../redirect.sh"
need_gpus 1
need_files "$CTXGUARD" "$REDIRECT" "$SM90_CUBIN"
bad=0 shadowed=0 refused=()
for mode in abort redirect; do
	for combo in "${COMBOS_CONTIGUOUS[@]}" "${COMBOS_LAYOUTS[@]}"; do
		name=${combo/ /_}_$mode
		# shellcheck disable=SC2086  # combo is "DTYPE LAYOUT"
		"$CTXGUARD" --mode "$mode" --shadow --log "$TMP/$name.jsonl" -- \
			"$REDIRECT" $combo same "$SM90_CUBIN" >"$TMP/$name.out" 2>"$TMP/$name.err"
		status=$?
		summary=$(grep -aoE 'shadowed [0-9]+, mismatched [0-9]+, undecodable [0-9]+' "$TMP/$name.err")
		records=$(grep -ac '"event":"shadow"' "$TMP/$name.jsonl" 2>/dev/null)
		matches=$(grep -ac '"result":"match"' "$TMP/$name.jsonl" 2>/dev/null)
		worst=$(grep -aoE '"max_rel_err":[^,]*' "$TMP/$name.jsonl" 2>/dev/null | cut -d: -f2 | sort -g | tail -n 1)
		printf '%-18s %-8s exit %s: %s; %s record(s), %s match, worst error %s\n' "$combo" "$mode" \
			"$status" "${summary:-no summary}" "${records:-0}" "${matches:-0}" "${worst:-none}"
		if grep -aq 'without its grouped_mm kernels' "$TMP/$name.jsonl" 2>/dev/null; then
			skip "libctxguard.so was built without nvcc: no bundled kernels to shadow with"
		fi
		if [[ $status != 0 ]] || ! grep -aqx 'deepgemm_redirect: ok' "$TMP/$name.out" ||
			[[ $summary != *"mismatched 0"* ]] || (( ${records:-0} < 1 )); then
			echo "      FAIL: wrong, mismatched, or no shadow record"
			grep -aE '^(ctxguard|CUDA driver error|deepgemm_redirect: .*rel error)' "$TMP/$name.err" \
				"$TMP/$name.out" | head -n 8 | sed 's/^/      /'
			bad=$((bad + 1))
			continue
		fi
		if [[ $summary != *"undecodable 0"* ]]; then
			reason=$(grep -aoE '"reason":"[^"]*"' "$TMP/$name.jsonl" | head -n 1)
			echo "      not shadowed: $reason"
			refused+=("$combo ($mode)")
		fi
		shadowed=$((shadowed + matches))
	done
done
(( bad == 0 )) || fail "$bad combinations wrong, mismatched or not shadowed"
(( ${#refused[@]} == 0 )) || fail "refused by the decode: ${refused[*]}"
(( shadowed > 0 )) || fail "nothing shadowed"
pass "$shadowed launches shadowed, 0 mismatched, none refused"
