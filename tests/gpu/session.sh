#!/bin/bash
# One GPU session for the grouped_mm kernels: build the fatbin and the
# standalone library with the machine's nvcc, count the Hopper matrix
# instructions in the SASS, run the GPU suite, run the benchmark.  Logs go to
# $OUT (default build/gpu_session); the benchmark table is printed last.
#   tests/gpu/session.sh [test|bench|all]   (default all)
# NCU_SHAPES="shape;shape" also profiles ours on those benchmark shapes with
# Nsight Compute (clocks left alone).
set -u -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/gpu_session}
mkdir -p "$OUT"
what=${1:-all}
export PYTHONUNBUFFERED=1

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader |
	tee "$OUT/gpu.txt"
make -B -f kernels/kernels.mk BUILD=build gmm-standalone 2>&1 | tee "$OUT/build.log" || exit 1

if command -v cuobjdump >/dev/null; then
	cuobjdump -sass build/kernels/grouped_mm.fatbin >"$OUT/sass.txt"
	# per kernel and architecture: wgmma (HGMMA bf16, QGMMA fp8) and mma.sync (HMMA) counts
	awk '/arch = /{arch=$3} /Function :/{fn=$3} /HGMMA/{h[arch" "fn]++} /QGMMA/{q[arch" "fn]++}
	     /HMMA/{m[arch" "fn]++} /Function :/{seen[arch" "fn]=1}
	     END{for (k in seen) printf "%-40s HGMMA %4d QGMMA %4d HMMA %4d\n", k, h[k], q[k], m[k]}' \
		"$OUT/sass.txt" | sort | tee "$OUT/sass_counts.txt"
	cuobjdump -res-usage build/kernels/grouped_mm.fatbin 2>&1 | grep -E "Function|REG" >"$OUT/res_usage.txt"
fi

status=0
if [ "$what" != bench ]; then
	timeout 400 python3 tests/gpu/test_grouped_mm.py 2>&1 | tee "$OUT/test.log"
	status=$?
fi
if [ "$what" != test ]; then
	timeout 480 python3 bench/bench_grouped_mm.py 2>&1 | tee "$OUT/bench.log" || status=1
fi
if [ -n "${NCU_SHAPES:-}" ] && command -v ncu >/dev/null; then
	IFS=';' read -ra shapes <<<"$NCU_SHAPES"
	for sh in "${shapes[@]}"; do
		timeout 120 ncu --clock-control none -k regex:cg_gmm --section SpeedOfLight \
			--section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
			python3 bench/bench_grouped_mm.py --profile --shapes "$sh"
	done >"$OUT/ncu.txt" 2>&1
	grep -E "cg_gmm|Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Compute \(SM\)|Stall" \
		"$OUT/ncu.txt" | head -60
fi
exit $status
