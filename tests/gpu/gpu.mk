# Build rules for the GPU suite's fixtures.  tests/gpu/run.sh runs
#   make -f tests/gpu/gpu.mk BUILD=build gpu-fixtures
# before the cases (a no-op when up to date).  The top-level Makefile may
# `include tests/gpu/gpu.mk` after its own first target, so that `make`
# keeps its default goal.
#   build/gpu/deepgemm_abi.cubin     fixture kernels (DeepGEMM's sm90 bf16 ABI,
#                                    producer, empty), Hopper only
#   build/examples/deepgemm_route    DeepGEMM's driver route; dlopens libcuda,
#                                    so it links nothing CUDA
#   build/gpu/deepgemm_sm90.cubin    DeepGEMM's exact sm90 kernel names and ABIs
#                                    (bf16, fp8 1d2d, transpose_fp32), producer
#   build/examples/deepgemm_redirect one DeepGEMM call per (dtype, layout,
#                                    situation), checked (issue 10's redirect)
BUILD ?= build
CUDA ?= /usr/local/cuda
NVCC ?= $(firstword $(wildcard $(CUDA)/bin/nvcc) nvcc)
GPU_CC ?= $(CC)
GPU_CFLAGS ?= -std=c11 -D_GNU_SOURCE -Wall -Wextra $(WERROR_FLAG) -O2 -g -fPIC $(EXTRA_CFLAGS)

GPU_FIXTURES := $(BUILD)/gpu/deepgemm_abi.cubin $(BUILD)/examples/deepgemm_route \
                $(BUILD)/gpu/deepgemm_sm90.cubin $(BUILD)/examples/deepgemm_redirect

.PHONY: gpu-fixtures
gpu-fixtures: $(GPU_FIXTURES)

$(BUILD)/gpu/%.cubin: kernels/fixtures/%.cu kernels/fixtures/fixture_ptx.cuh
	@mkdir -p $(@D)
	$(NVCC) -gencode=arch=compute_90a,code=sm_90a -cubin $(if $(WERROR_FLAG),-Werror all-warnings) -o $@ $<

$(BUILD)/examples/deepgemm_route: examples/deepgemm_route.c examples/deepgemm_host.h
	@mkdir -p $(@D)
	$(GPU_CC) $(GPU_CFLAGS) -I$(CUDA)/include -o $@ $< -ldl -lm

$(BUILD)/examples/deepgemm_redirect: examples/deepgemm_redirect.c examples/deepgemm_host.h
	@mkdir -p $(@D)
	$(GPU_CC) $(GPU_CFLAGS) -I$(CUDA)/include -o $@ $< -ldl -lm

# A launch past the hooks (GPU cases 40-42): cuLaunchKernel from libcuda's .dynsym.
gpu-fixtures: $(BUILD)/gpu/unhooked_route
$(BUILD)/gpu/unhooked_route: tests/gpu/unhooked_route.c tests/libcuda_symbol.h
	@mkdir -p $(@D)
	$(GPU_CC) $(GPU_CFLAGS) -I$(CUDA)/include -o $@ $< -ldl

# The contexts-on-one-device truth table (case 19): links libcuda directly
# (the toolkit's stub at link time), so a preloaded ctxguard sees each call.
gpu-fixtures: $(BUILD)/gpu/ctx_table $(BUILD)/gpu/ctx_table.ptx
$(BUILD)/gpu/ctx_table: tests/gpu/ctx_table.c
	@mkdir -p $(@D)
	$(GPU_CC) $(GPU_CFLAGS) -I$(CUDA)/include -o $@ $< -L$(CUDA)/lib64/stubs -lcuda
$(BUILD)/gpu/ctx_table.ptx: tests/gpu/ctx_table.cu
	@mkdir -p $(@D)
	$(NVCC) -ptx -arch=compute_90 -o $@ $<
