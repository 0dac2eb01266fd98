# Fake CUDA driver for the CPU tests: $(BUILD)/fake/libcuda.so.1 (+ libcuda.so link).
# -D__CUDA_API_VERSION_INTERNAL declares every versioned variant, so each definition is
# checked against the real prototype. -fvisibility=default overrides a hidden default in
# CFLAGS: every cu* and fake_* function is an export (fake.h hides the internals).
# -Bsymbolic binds the library's references to its own functions: cuGetProcAddress must
# return the addresses dlsym(libcuda, name) returns even when a preloaded shim defines the
# same names. libcuda.map versions the exports as NVIDIA's libraries do.
FAKE_CUDA_INCLUDE ?= $(or $(CUDA),/usr/local/cuda)/include
FAKE_SRCS := $(wildcard tests/fake/*.c)
FAKE_HDRS := $(wildcard tests/fake/*.h)
FAKE_LIB := $(BUILD)/fake/libcuda.so.1
FAKE_TARGETS := $(FAKE_LIB) $(BUILD)/fake/libcuda.so

# fatbin.c reads the bundled kernels' table from kernels/gmm_kernels.h
$(FAKE_LIB): $(FAKE_SRCS) $(FAKE_HDRS) tests/fake/libcuda.map kernels/gmm_kernels.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fvisibility=default -D__CUDA_API_VERSION_INTERNAL -I$(FAKE_CUDA_INCLUDE) \
		-shared -fPIC -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic \
		-Wl,--version-script=tests/fake/libcuda.map -o $@ $(FAKE_SRCS) -lpthread

$(BUILD)/fake/libcuda.so: $(FAKE_LIB)
	ln -sf libcuda.so.1 $@

# Fake CUPTI for the backstop's tests: $(BUILD)/fake/cupti/libcupti.so, apart from
# libcuda's directory so that nothing finds it unless CTXGUARD_CUPTI names it.
FAKE_CUPTI := $(BUILD)/fake/cupti/libcupti.so

$(FAKE_CUPTI): tests/fake/cupti/cupti.c tests/fake/fake_api.h tests/hold.h $(FAKE_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fvisibility=default -I$(FAKE_CUDA_INCLUDE) -shared -fPIC \
		-Wl,-soname,libcupti.so -o $@ $< -ldl -lpthread

$(BUILD)/tests/check_backstop: $(FAKE_CUPTI)
