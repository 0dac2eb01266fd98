# The differential test's models (tests/model, tests/check_differential.c):
# bundled.cpp is kernels/gmm_sched.cuh compiled unchanged for the host, by
# the C compiler's own C++ driver (its objects link with the C ones).
MODEL_CXX ?= $(if $(findstring clang,$(CC)),clang++,c++)
MODEL_OBJ := $(BUILD)/tests/model/bundled.o

$(MODEL_OBJ): tests/model/bundled.cpp tests/model/bundled.h kernels/gmm_sched.cuh \
              kernels/gmm_kernels.h
	@mkdir -p $(dir $@)
	$(MODEL_CXX) -std=c++17 $(filter-out -std=% -flto%,$(CFLAGS)) -c $< -o $@

$(BUILD)/tests/check_differential: shim/redirect/decode.c tests/model/deepgemm.c tests/model/differ.c \
                                   $(wildcard tests/model/*.h) shim/redirect/redirect.h $(MODEL_OBJ)
$(BUILD)/tests/check_differential: TEST_LIBS += $(MODEL_OBJ) -lstdc++
