# Build rules for the GPU suite's fixtures.  tests/gpu/run.sh runs
#   make -f tests/gpu/gpu.mk BUILD=build gpu-fixtures
# before the cases (a no-op when up to date).  The top-level Makefile may
# `include tests/gpu/gpu.mk` after its own first target, so that `make`
# keeps its default goal.
#   build/gpu/deepgemm_abi.cubin     fixture kernels (DeepGEMM's sm90 bf16 ABI,
#                                    producer, empty), Hopper only
#   build/examples/deepgemm_route    DeepGEMM's driver route; dlopens libcuda,
#                                    so it links nothing CUDA
BUILD ?= build
CUDA ?= /usr/local/cuda
NVCC ?= $(firstword $(wildcard $(CUDA)/bin/nvcc) nvcc)
GPU_CC ?= $(CC)
GPU_CFLAGS ?= -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g -fPIC

GPU_FIXTURES := $(BUILD)/gpu/deepgemm_abi.cubin $(BUILD)/examples/deepgemm_route

.PHONY: gpu-fixtures
gpu-fixtures: $(GPU_FIXTURES)

$(BUILD)/gpu/deepgemm_abi.cubin: kernels/fixtures/deepgemm_abi.cu
	@mkdir -p $(@D)
	$(NVCC) -gencode=arch=compute_90a,code=sm_90a -cubin -Werror all-warnings -o $@ $<

$(BUILD)/examples/deepgemm_route: examples/deepgemm_route.c
	@mkdir -p $(@D)
	$(GPU_CC) $(GPU_CFLAGS) -I$(CUDA)/include -o $@ $< -ldl -lm

# A launch past the hooks (GPU cases 40-42): cuLaunchKernel from libcuda's .dynsym.
gpu-fixtures: $(BUILD)/gpu/unhooked_route
$(BUILD)/gpu/unhooked_route: tests/gpu/unhooked_route.c
	@mkdir -p $(@D)
	$(GPU_CC) $(GPU_CFLAGS) -I$(CUDA)/include -o $@ $< -ldl
