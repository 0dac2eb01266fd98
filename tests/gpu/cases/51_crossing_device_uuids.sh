#!/usr/bin/env bash
# A crossing's record names both devices as the fleet does: DeepGEMM's
# route, function on one GPU and launch on the other, under --mode warn
# --log: the crossing record's owner_uuid and launch_uuid are two different
# GPU UUIDs of this machine, owner_pci and launch_pci their PCI bus ids, as
# nvidia-smi lists them.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
need_gpus 2 "the record must name two GPUs"
need_files "$CTXGUARD" "$ROUTE" "$CUBIN"
run warn "$CTXGUARD" --mode warn --log "$TMP/warn.%p.jsonl" -- "$ROUTE" cross "$CUBIN"
show warn
skip_if_unreproducible warn
nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv,noheader >"$TMP/gpus.csv" ||
	fail "nvidia-smi cannot list the GPUs"
echo "--- nvidia-smi"
cat "$TMP/gpus.csv"
evidence warn
"$PYTHON" - "$TMP/gpus.csv" "$TMP"/warn.*.jsonl <<'PY' || fail "the crossing record does not name both devices"
import json, sys
gpus = {}
for line in open(sys.argv[1]):
    index, uuid, bus = (f.strip() for f in line.split(","))
    # nvidia-smi: 00000000:18:00.0; the driver API: 0000:18:00.0
    gpus[uuid.lower()] = bus.lower()[-12:]
crossings = [r for f in sys.argv[2:] for r in map(json.loads, open(f)) if r["event"] == "crossing"]
if not crossings:
    print("no crossing record")
    sys.exit(1)
r = crossings[0]
print({k: r.get(k) for k in ("owner_dev", "owner_pci", "owner_uuid", "launch_dev", "launch_pci", "launch_uuid")})
ok = True
for side in ("owner", "launch"):
    uuid, pci = (r.get(f"{side}_uuid") or "").lower(), (r.get(f"{side}_pci") or "").lower()
    if uuid not in gpus:
        print(f"{side}_uuid {uuid!r} is not one of this machine's GPUs")
        ok = False
    elif gpus[uuid] != pci[-12:]:
        print(f"{side}_pci {pci!r} is not {uuid}'s bus {gpus[uuid]!r}")
        ok = False
if r.get("owner_uuid") == r.get("launch_uuid"):
    print("owner and launch name the same GPU")
    ok = False
print("device names ok" if ok else "device names wrong")
sys.exit(0 if ok else 1)
PY
pass "the crossing record names both GPUs by UUID and PCI bus id"
