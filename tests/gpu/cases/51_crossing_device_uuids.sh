#!/usr/bin/env bash
# A crossing's record names both devices as the fleet does: DeepGEMM's
# route, function on one GPU and launch on the other, under --mode warn
# --log: the crossing record's owner_uuid and launch_uuid are two different
# GPU UUIDs of this machine, owner_pci and launch_pci their PCI bus ids, as
# nvidia-smi lists them.  One GPU (the second context created on device 0):
# both name that GPU, and owner_ctx and launch_ctx differ.
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/../lib.sh"
second_context
need_files "$CTXGUARD" "$ROUTE" "$CUBIN"
run warn "$CTXGUARD" --mode warn --log "$TMP/warn.%p.jsonl" -- "$ROUTE" "${SECOND[@]}" cross "$CUBIN"
show warn
skip_if_unreproducible warn
nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv,noheader >"$TMP/gpus.csv" ||
	fail "nvidia-smi cannot list the GPUs"
echo "--- nvidia-smi"
cat "$TMP/gpus.csv"
evidence warn
"$PYTHON" - "${#SECOND[@]}" "$TMP/gpus.csv" "$TMP"/warn.*.jsonl <<'PY' || fail "the crossing record does not name both devices"
import json, sys
one_gpu = sys.argv.pop(1) != "0"
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
print({k: r.get(k) for k in ("owner_ctx", "owner_dev", "owner_pci", "owner_uuid",
                             "launch_ctx", "launch_dev", "launch_pci", "launch_uuid")})
ok = True
for side in ("owner", "launch"):
    uuid, pci = (r.get(f"{side}_uuid") or "").lower(), (r.get(f"{side}_pci") or "").lower()
    if uuid not in gpus:
        print(f"{side}_uuid {uuid!r} is not one of this machine's GPUs")
        ok = False
    elif gpus[uuid] != pci[-12:]:
        print(f"{side}_pci {pci!r} is not {uuid}'s bus {gpus[uuid]!r}")
        ok = False
if one_gpu:
    if r.get("owner_uuid") != r.get("launch_uuid"):
        print("owner and launch name two GPUs, but both contexts are device 0's")
        ok = False
    if r.get("owner_ctx") == r.get("launch_ctx"):
        print("owner and launch name the same context")
        ok = False
elif r.get("owner_uuid") == r.get("launch_uuid"):
    print("owner and launch name the same GPU")
    ok = False
print("device names ok" if ok else "device names wrong")
sys.exit(0 if ok else 1)
PY
pass "the crossing record names the GPU of each context by UUID and PCI bus id"
