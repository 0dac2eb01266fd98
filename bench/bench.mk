# Build rules for the launch-overhead benchmark.  The top-level Makefile may
# `include bench/bench.mk` after its own first target, so that `make` keeps
# its default goal; alone:
#   make -f bench/bench.mk BUILD=build [bench-overhead]
#   build/bench/launch_overhead   empty-kernel launch loops: driver API
#                                 (libcuda linked directly; the stub at link
#                                 time), runtime API (cudart linked
#                                 statically, so nothing but the driver is
#                                 needed where it runs), DeepGEMM-shaped expert
#   build/bench/driver_queries    the cost of each driver query ctxguard
#                                 may make on a launch, and of a tensor
#                                 map's encoding (bundled grouped_mm)
#   build/bench/driver_waits      which driver calls wait for the device's
#                                 running work (a redirect must not)
#   bench-overhead                builds it, runs bench/run_overhead.py (a GPU
#                                 machine; build/libctxguard.so must exist)
#   bench-redirect                a redirected DeepGEMM call vs a plain
#                                 bundled launch (two GPUs, torch)
#   bench-backstop                its backstop row only: ctxguard with and
#                                 without the CUPTI backstop
BUILD ?= build
CUDA ?= /usr/local/cuda
BENCH_CC ?= $(CC)
BENCH_CFLAGS ?= -std=c11 -D_GNU_SOURCE -Wall -Wextra $(WERROR_FLAG) -O2 -g -fPIC $(EXTRA_CFLAGS)

$(BUILD)/bench/launch_overhead: bench/launch_overhead.c bench/cu_check.h tests/libcuda_symbol.h
	@mkdir -p $(@D)
	$(BENCH_CC) $(BENCH_CFLAGS) -I$(CUDA)/include -o $@ $< -L$(CUDA)/lib64/stubs -lcuda \
	    $(CUDA)/lib64/libcudart_static.a -ldl -lpthread -lrt

# The driver queries a checked launch may add, timed on a GPU machine.
$(BUILD)/bench/driver_queries: bench/driver_queries.c bench/cu_check.h
	@mkdir -p $(@D)
	$(BENCH_CC) $(BENCH_CFLAGS) -I$(CUDA)/include -o $@ $< -L$(CUDA)/lib64/stubs -lcuda

# Which driver calls wait for a context's running work (GPU machine).
$(BUILD)/bench/driver_waits: bench/driver_waits.c bench/cu_check.h
	@mkdir -p $(@D)
	$(BENCH_CC) $(BENCH_CFLAGS) -I$(CUDA)/include -o $@ $< -L$(CUDA)/lib64/stubs -lcuda -lpthread

# $(LIB) is the top-level Makefile's build/libctxguard.so (empty when alone).
.PHONY: bench-overhead
bench-overhead: $(BUILD)/bench/launch_overhead $(LIB)
	bench/run_overhead.py $(BUILD)

# CUPTI backstop's cost per launch, ctxguard with and without it (GPU machine).
.PHONY: bench-backstop
bench-backstop: $(BUILD)/bench/launch_overhead $(LIB)
	ROWS=backstop bench/run_overhead.py $(BUILD)

# The shim's cost per launch in instructions, on the fake driver (no GPU).
$(BUILD)/bench/hotpath: bench/hotpath.c bench/cu_check.h $(FAKE_LIB)
	@mkdir -p $(@D)
	$(BENCH_CC) $(BENCH_CFLAGS) -I$(CUDA)/include -o $@ $< -L$(BUILD)/fake -l:libcuda.so.1 \
	    -Wl,-rpath,'$$ORIGIN/../fake'

# Both builds are counted: with link-time optimisation (when the compiler
# can, the default) and without it (what a compiler that cannot gets); each
# fails above the budget bench/hotpath.sh gives its rows (CI runs this).
.PHONY: bench-hotpath
bench-hotpath: $(BUILD)/bench/hotpath $(LIB)
	$(MAKE) --no-print-directory BUILD=$(BUILD)/nolto LTO= $(BUILD)/nolto/libctxguard.so \
	    $(BUILD)/nolto/bench/hotpath
	@echo "with link-time optimisation ($(or $(LTO),not available: same as below)):"
	bench/hotpath.sh $(BUILD)
	@echo "without link-time optimisation:"
	bench/hotpath.sh $(BUILD)/nolto

# A redirected DeepGEMM call against a plain launch of the same bundled
# kernel on the right device (bench/bench_redirect.py; two GPUs, torch).
# The fixture cubin's rule is tests/gpu/gpu.mk's.
.PHONY: bench-redirect
bench-redirect: $(LIB) $(CMD) $(BUILD)/gpu/deepgemm_sm90.cubin
	CG_GMM_LIB=$(abspath $(LIB)) $(CMD) --mode redirect -- python3 bench/bench_redirect.py \
	    --cubin $(BUILD)/gpu/deepgemm_sm90.cubin
