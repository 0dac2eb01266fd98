#!/usr/bin/env bash
# Fleet logs: `ctxguard --log DIR/%h.%r.jsonl -- torchrun` with two ranks
# (the EP job of case 17) writes one file per rank, <host>.0.jsonl and
# <host>.1.jsonl; every record in each carries that rank, the job's
# world size, local rank and run id, the host, pid, tid, version and an
# ISO 8601 UTC time; each worker's summary checked launches and counts 0
# crossings.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 2 "two ranks, one device each"
need_files "$CTXGUARD" examples/ep_torchrun.py
need_python torch
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export TRITON_CACHE_DIR=$TMP/triton
port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') ||
	fail "no free TCP port"
mkdir -p "$TMP/logs" || fail "cannot make $TMP/logs"
run ranks "$CTXGUARD" --mode abort --scope all --error-exitcode 86 --log "$TMP/logs/%h.%r.jsonl" -- \
	"$PYTHON" -m torch.distributed.run --nproc_per_node=2 --master_addr=127.0.0.1 --master_port="$port" \
	examples/ep_torchrun.py
show ranks
[[ $STATUS != 77 ]] || skip "$(tail -n 1 "$TMP/ranks.out")"
echo "--- log files"
ls -l "$TMP/logs"
for f in "$TMP"/logs/*.jsonl; do
	[[ -e $f ]] || continue
	echo "--- ${f##*/}: first and last records"
	head -n 2 "$f"
	tail -n 1 "$f"
done
echo "---"
expect_status 0
"$PYTHON" - "$TMP/logs" "$(hostname)" <<'PY' || fail "rank logs do not carry their rank (see above)"
import json, os, re, sys
logs, host = sys.argv[1], sys.argv[2]
# %h in a path keeps letters, digits, '-', '_' and an inner '.'.
safe = "".join(c if c.isalnum() or c in "-_" or (c == "." and i) else "_" for i, c in enumerate(host))
time_re = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
bad = 0
for rank in ("0", "1"):
    path = os.path.join(logs, f"{safe}.{rank}.jsonl")
    if not os.path.exists(path):
        print(f"missing {path}")
        bad += 1
        continue
    records = [json.loads(l) for l in open(path) if l.strip()]
    events = [r["event"] for r in records]
    print(f"{os.path.basename(path)}: {len(records)} records, events {sorted(set(events))}")
    for r in records:
        for key, want in (("rank", rank), ("local_rank", rank), ("world_size", "2"), ("host", host)):
            if r.get(key) != want:
                print(f"  {key}={r.get(key)!r}, expected {want!r}: {json.dumps(r)[:300]}")
                bad += 1
        for key in ("pid", "tid", "version", "torchelastic_run_id"):
            if key not in r:
                print(f"  no {key}: {json.dumps(r)[:300]}")
                bad += 1
        if not time_re.match(str(r.get("time"))):
            print(f"  time {r.get('time')!r} is not ISO 8601 UTC with microseconds")
            bad += 1
    sums = [r for r in records if r["event"] == "summary"]
    if not any(s.get("launches", 0) > 0 for s in sums):
        print(f"  no summary of rank {rank} checked a launch")
        bad += 1
    if any(sum(s["crossings"].values()) for s in sums):
        print(f"  rank {rank} counted crossings")
        bad += 1
    if "crossing" in events:
        print(f"  rank {rank} logged a crossing")
        bad += 1
print("rank records ok" if not bad else f"{bad} problem(s)")
sys.exit(1 if bad else 0)
PY
pass "two ranks, one log per rank, every record with its rank"
