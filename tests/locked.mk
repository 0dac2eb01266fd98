# A copy of the library whose system policy is $(BUILD)/tests/etc/ctxguard/policy.conf,
# so that check_lock can lock a policy for the shim without touching /etc.
LOCKED_ETC := $(abspath $(BUILD))/tests/etc
LOCKED_LIB := $(BUILD)/tests/locked/libctxguard.so

$(BUILD)/tests/locked/config.o: policy/config.c $(wildcard policy/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DCG_SYSCONFDIR='"$(LOCKED_ETC)"' -c $< -o $@

$(LOCKED_LIB): $(BUILD)/tests/locked/config.o $(SHIM_OBJ) $(filter-out %/config.o,$(POLICY_OBJ)) \
	       $(KERNEL_OBJ)
	$(CC) $(OPT) $(LTO) -shared -Wl,-soname,libctxguard.so -Wl,--no-undefined \
	    -o $@ $^ $(LDFLAGS_SAN) -ldl -lpthread -lm

$(BUILD)/tests/check_lock $(BUILD)/tests/check_secure: $(LOCKED_LIB)
