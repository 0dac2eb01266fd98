# The suite's own copies of the library, the ctxguard command and the policy
# archive, each compiled with a system policy of its own instead of the
# build's SYSCONFDIR: the suite never reads, and is never locked or loosened
# by, the policy an operator installed on this machine.
#   tests/suite:  BUILD/tests/none/ctxguard/policy.conf, which nothing writes:
#                 every test starts from the built-in policy;
#   tests/locked: BUILD/tests/etc/ctxguard/policy.conf, which check_lock and
#                 check_secure write to lock a policy for the shim.
SUITE_ETC  := $(abspath $(BUILD))/tests/none
LOCKED_ETC := $(abspath $(BUILD))/tests/etc
SUITE_LIB  := $(BUILD)/tests/suite/libctxguard.so
SUITE_CMD  := $(BUILD)/tests/suite/ctxguard
SUITE_POLICY := $(BUILD)/tests/suite/libpolicy.a
LOCKED_LIB := $(BUILD)/tests/locked/libctxguard.so

$(BUILD)/tests/suite/loader.o: COPY_ETC := $(SUITE_ETC)
$(BUILD)/tests/locked/loader.o: COPY_ETC := $(LOCKED_ETC)
$(BUILD)/tests/%/loader.o: policy/loader.c $(wildcard policy/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DCG_SYSCONFDIR='"$(COPY_ETC)"' -c $< -o $@

$(BUILD)/tests/%/libctxguard.so: $(BUILD)/tests/%/loader.o $(SHIM_OBJ) \
				 $(filter-out %/loader.o,$(POLICY_OBJ)) $(KERNEL_OBJ)
	$(CC) $(OPT) $(LTO) -shared -Wl,-soname,libctxguard.so -Wl,--no-undefined \
	    -o $@ $^ $(LDFLAGS_SAN) -ldl -lpthread -lm

$(SUITE_POLICY): $(BUILD)/tests/suite/loader.o $(filter-out %/loader.o,$(POLICY_OBJ))
	ar rcs $@ $^

# Next to its library, which it finds there.
$(SUITE_CMD): shim/cli/cli.c $(SUITE_POLICY) $(KERNELS_STAMP) | $(SUITE_LIB)
	$(CC) $(CFLAGS) $(CLI_DEFS) -o $@ $(filter %.c %.a,$^) $(LDFLAGS_SAN)

$(BUILD)/tests/check_lock $(BUILD)/tests/check_secure: $(LOCKED_LIB)

# The enforcement path, /etc/ld.so.preload with a locked backstop, in a
# chroot (root: CI runs it; elsewhere it skips).
.PHONY: test-preload
test-preload: $(LOCKED_LIB) $(FAKE_LIB) $(FAKE_CUPTI) $(BUILD)/tests/progs/scenario \
	      $(BUILD)/tests/libs/libbypass.so
	tests/ld_so_preload.sh $(BUILD); rc=$$?; [ $$rc = 0 ] || [ $$rc = 77 ]
