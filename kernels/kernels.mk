# Bundled grouped_mm kernels: one fatbin (sm_90a and sm_80 machine code, and
# compute_80 PTX for later GPUs) embedded into the library by kernels/embed.c.
# Included by the top-level Makefile after BUILD is set; adds the host API's
# objects, $(BUILD)/obj/kernels/*.o, to KERNEL_OBJ (linked into
# libctxguard.so with -ldl -lpthread) and makes embed.o depend on the
# fatbin.  Also provides
#   $(BUILD)/kernels/libcg_gmm.so  the host API and kernels alone, for the
#                   GPU tests and benchmark:
#                   make -f kernels/kernels.mk BUILD=build gmm-standalone
#   bench-passes    the consumer loop's pass structures timed alone (GPU;
#                   REPS=300: launches each, at the GPU's power limit;
#                   BLOCKS=66: fewer blocks than multiprocessors;
#                   LOADS=0|1|2 in the environment: the ring loads
#                   nothing, A alone, B alone)
# Without nvcc the host API is built with -DCG_NO_KERNELS: every call
# returns CUDA_ERROR_NOT_SUPPORTED and says why.

NVCC ?= /usr/local/cuda/bin/nvcc
CUDA_INC ?= /usr/local/cuda/include

KERNELS_CU := kernels/grouped_mm.cu
KERNELS_DEPS := $(wildcard kernels/*.cuh) kernels/gmm_kernels.h
KERNELS_GENCODE := -gencode=arch=compute_90a,code=sm_90a \
	-gencode=arch=compute_80,code=sm_80 \
	-gencode=arch=compute_80,code=compute_80
KERNELS_NVCCFLAGS := -std=c++17 -O3 --threads 0 -Xptxas -warn-spills $(if $(WERROR_FLAG),-Werror all-warnings)
KERNELS_LDLIBS := -ldl -lpthread

ifneq ($(shell command -v $(NVCC) 2>/dev/null),)
comma := ,
# What `ctxguard --version` says is inside: each code= target and nvcc's release.
KERNELS_DESC := $(patsubst code=%,%,$(filter code=%,$(subst $(comma), ,$(KERNELS_GENCODE)))) \
	(CUDA $(shell $(NVCC) --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p'))
KERNELS_FATBIN := $(BUILD)/kernels/grouped_mm.fatbin
KERNELS_CFLAGS := -I$(CUDA_INC) -DCG_GMM_FATBIN='"$(KERNELS_FATBIN)"'

# ptxas reports serialized wgmma (C7510-C7520) or an ignored setmaxnreg
# (C7508) as "info", yet either costs ~30%: fail the build on them.
$(KERNELS_FATBIN): $(KERNELS_CU) $(KERNELS_DEPS) kernels/kernels.mk
	@mkdir -p $(@D)
	$(NVCC) $(KERNELS_NVCCFLAGS) $(KERNELS_GENCODE) -fatbin -o $@ $(KERNELS_CU) 2>$@.log; \
	    status=$$?; cat $@.log; \
	    if [ $$status -ne 0 ] || grep -q "(C75" $@.log; then rm -f $@; exit 1; fi

# The consumer loop's pass structures on the tensor pipe alone (one H200;
# kernels/NOTES.md v27): bench/bench_passes.cu, not part of the fatbin.
$(BUILD)/kernels/bench_passes: bench/bench_passes.cu $(KERNELS_DEPS) kernels/kernels.mk
	@mkdir -p $(@D)
	$(NVCC) $(KERNELS_NVCCFLAGS) -gencode=arch=compute_90a,code=sm_90a -Ikernels -o $@ $<

.PHONY: bench-passes
bench-passes: $(BUILD)/kernels/bench_passes
	$(BUILD)/kernels/bench_passes $(or $(REPS),7) $(BLOCKS)
else
$(info ctxguard: warning: $(NVCC) not found: building without the grouped_mm kernels (redirect and the ops return CUDA_ERROR_NOT_SUPPORTED; NVCC=... names nvcc))
KERNELS_DESC := none (built without nvcc)
KERNELS_FATBIN :=
KERNELS_CFLAGS := -I$(CUDA_INC) -DCG_NO_KERNELS
endif

KERNELS_C := $(wildcard kernels/*.c)
KERNELS_OBJ := $(KERNELS_C:%.c=$(BUILD)/obj/%.o)
KERNEL_OBJ += $(KERNELS_OBJ)
$(KERNELS_OBJ): CFLAGS += $(KERNELS_CFLAGS)
$(KERNELS_OBJ): $(wildcard kernels/*.h)
$(BUILD)/obj/kernels/embed.o: $(KERNELS_FATBIN)

KERNELS_CSTD := -std=c11 -D_GNU_SOURCE -Wall -Wextra $(WERROR_FLAG) -O2 -g -fPIC $(EXTRA_CFLAGS)

$(BUILD)/kernels/libcg_gmm.so: $(KERNELS_C) $(wildcard kernels/*.h) $(KERNELS_FATBIN)
	@mkdir -p $(@D)
	$(CC) $(KERNELS_CSTD) $(KERNELS_CFLAGS) -shared -o $@ $(KERNELS_C) $(KERNELS_LDLIBS)

.PHONY: gmm-standalone
gmm-standalone: $(BUILD)/kernels/libcg_gmm.so
