# ctxguard — `make` builds build/libctxguard.so and build/ctxguard;
# `make test` runs the CPU suite (installs Debian's check if missing);
# `make demo` runs the reproduction under the shim; `make test-gpu` runs the
# GPU suite on a machine with GPUs; `make asan` / `make tsan` run the suite
# under the sanitizers; `make fuzz` fuzzes the policy parser (clang);
# `make install PREFIX=... SYSCONFDIR=...`.

BUILD   ?= build
CUDA    ?= /usr/local/cuda
NVCC    ?= $(CUDA)/bin/nvcc
CC      ?= cc
PREFIX  ?= /usr/local
# The system policy is SYSCONFDIR/ctxguard/policy.conf, compiled in.
SYSCONFDIR ?= /etc
VERSION := $(shell cat VERSION)
SAN     ?=
OPT     ?= -O2
# Warnings never break a user's build: whatever compiler, distribution or
# _FORTIFY_SOURCE default they have.  Developers and CI build with WERROR=1.
WERROR  ?=
WERROR_FLAG := $(if $(filter 1,$(WERROR)),-Werror)
# Extra compiler flags for every C file (CI: -D_FORTIFY_SOURCE=2).
EXTRA_CFLAGS ?=
# GLIBC=2.17: build with zig cc against that glibc's ABI (pip install
# ziglang; ZIG names another zig), so that the library and the command load
# on distributions older than the build machine (the wheel's build does).
# Without it they need the build machine's glibc or newer.
GLIBC   ?=
ZIG     ?= python3 -m ziglang
ifneq ($(GLIBC),)
CC := $(ZIG) cc -target $(shell uname -m)-linux-gnu.$(GLIBC)
AR := $(ZIG) ar
endif

# Link-time optimisation inlines across files; the launch path does not
# need it (its wrappers, handlers and check are one translation unit and
# what they read is inline: docs/launch-path.md, make bench-hotpath counts
# both builds).  It needs a compiler driver whose LTO plugin the system
# linker can run, so a tiny try-link decides; LTO= builds without it.
ifeq ($(origin LTO),undefined)
lto_try = $(shell d=$$(mktemp -d) && printf 'int f(void){return 0;}\n' >$$d/t.c && \
	$(CC) $(1) -O2 -fPIC -shared -o $$d/t.so $$d/t.c >/dev/null 2>&1 && echo $(1); rm -rf $$d)
LTO := $(or $(call lto_try,-flto=auto),$(call lto_try,-flto))
ifeq ($(LTO),)
$(info ctxguard: $(CC) cannot link with -flto here; building without link-time optimisation)
endif
endif
export LTO

CFLAGS  = -std=c11 -D_GNU_SOURCE $(OPT) $(LTO) -g -fPIC -fvisibility=hidden -Wall -Wextra \
          $(WERROR_FLAG) -I$(CUDA)/include -I$(CUDA)/extras/CUPTI/include $(SAN) $(EXTRA_CFLAGS)
# The one place the version is written; the log records carry it.
CFLAGS += -DCTXGUARD_VERSION='"$(VERSION)"'
LDFLAGS_SAN = $(SAN)

POLICY_SRC := $(wildcard policy/*.c)
# shim/ is one folder per subsystem (hook, track, check, redirect, report);
# shim/cli/ is the ctxguard command, not the library.
SHIM_SRC   := $(filter-out shim/cli/%,$(wildcard shim/*/*.c))
POLICY_OBJ := $(POLICY_SRC:%.c=$(BUILD)/obj/%.o)
SHIM_OBJ   := $(SHIM_SRC:%.c=$(BUILD)/obj/%.o)

LIB  := $(BUILD)/libctxguard.so
CMD  := $(BUILD)/ctxguard

.PHONY: all test demo test-gpu asan tsan install uninstall man clean check-deps
all: $(LIB) $(CMD)

# Extra library objects (kernels) and test/GPU rules live next to their code.
KERNEL_OBJ :=
-include kernels/kernels.mk
-include tests/fake/fake.mk
-include tests/gpu/gpu.mk
-include bench/bench.mk
-include tests/fuzz/fuzz.mk
-include tests/model/model.mk
-include tests/locked.mk

# $(call stamp,FILE,VALUE): FILE holds VALUE, rewritten (so newer) only when
# VALUE changed: a prerequisite that rebuilds what VALUE went into.
stamp = $(shell mkdir -p $(BUILD) && { [ "$$(cat $(1) 2>/dev/null)" = '$(2)' ] || echo '$(2)' > $(1); })

# Every object rebuilds when the compiler changes (cc, zig for GLIBC=...).
CC_STAMP := $(BUILD)/cc
$(call stamp,$(CC_STAMP),$(CC))

$(BUILD)/obj/%.o: %.c $(wildcard shim/*.h shim/*/*.h shim/*.def policy/*.h) $(CC_STAMP) | $(BUILD)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# default.conf is embedded with .incbin: rebuild when it changes.  A symbol
# that only top-level asm defines is invisible to the LTO plugin, which would
# then never pull this object out of libpolicy.a: compile it plainly.
$(BUILD)/obj/policy/builtin.o: policy/default.conf
$(BUILD)/obj/policy/builtin.o: LTO :=

# loader.o holds the system policy's path: the stamp rebuilds it when
# SYSCONFDIR changes.
SYSCONF_STAMP := $(BUILD)/sysconfdir
$(call stamp,$(SYSCONF_STAMP),$(SYSCONFDIR))
$(BUILD)/obj/policy/loader.o: $(SYSCONF_STAMP)
$(BUILD)/obj/policy/loader.o: CFLAGS += -DCG_SYSCONFDIR='"$(SYSCONFDIR)"'

$(BUILD)/libpolicy.a: $(POLICY_OBJ)
	$(AR) rcs $@ $^

# Hidden by default; the hooks and the C API are marked CG_EXPORT.
$(LIB): $(SHIM_OBJ) $(POLICY_OBJ) $(KERNEL_OBJ)
	$(CC) $(OPT) $(LTO) -shared -Wl,-soname,libctxguard.so -Wl,--no-undefined \
	    -o $@ $^ $(LDFLAGS_SAN) -ldl -lpthread -lm

# --version names the kernels built beside it (kernels.mk's KERNELS_DESC).
KERNELS_STAMP := $(BUILD)/kernels-desc
$(call stamp,$(KERNELS_STAMP),$(KERNELS_DESC))
# What the command says of its build (tests/locked.mk builds one too).
CLI_DEFS = -DCG_KERNELS='"$(KERNELS_DESC)"' -DCG_REPORT_SCRIPT='"$(CURDIR)/python/ctxguard/report.py"'
$(CMD): shim/cli/cli.c $(BUILD)/libpolicy.a $(KERNELS_STAMP)
	$(CC) $(CFLAGS) $(CLI_DEFS) -o $@ $(filter %.c %.a,$^) $(LDFLAGS_SAN)

$(BUILD):
	@mkdir -p $@

# ---- CPU test suite (Check + the fake driver) ----
CHECK_SRC  := $(wildcard tests/check_*.c)
CHECK_BIN  := $(CHECK_SRC:tests/%.c=$(BUILD)/tests/%)
PROG_SRC   := $(wildcard tests/progs/*.c)
PROG_BIN   := $(PROG_SRC:tests/progs/%.c=$(BUILD)/tests/progs/%)
CHECK_FLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS  = $(shell pkg-config --libs check 2>/dev/null)
TEST_LIBS   = -Wl,--as-needed $(SUITE_POLICY) -L$(BUILD)/fake -l:libcuda.so.1 \
              -Wl,-rpath,'$$ORIGIN/../fake' -Wl,-rpath,'$$ORIGIN/../../fake' -ldl -lpthread -lm

check-deps:
	@tests/deps.sh

$(BUILD)/tests/check_%: tests/check_%.c $(SUITE_POLICY) $(FAKE_LIB) $(wildcard tests/*.h) | check-deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $$(pkg-config --cflags check) -Itests -o $@ $(filter %.c,$^) $(TEST_LIBS) \
	    $$(pkg-config --libs check) $(LDFLAGS_SAN)

# The decode is a pure function: its suite links it alone.
$(BUILD)/tests/check_decode: shim/redirect/decode.c shim/redirect/decode.h
# So is the shadow's comparison.
$(BUILD)/tests/check_shadow: shim/redirect/shadow_compare.c shim/redirect/shadow.h

# The kernel table itself (its host half, without the kernels): the suite
# checks the sizes the host launches with.
$(BUILD)/tests/check_grouped_mm: kernels/gmm_module.c kernels/gmm_internal.h kernels/gmm_kernels.h
$(BUILD)/tests/check_grouped_mm: CFLAGS += -DCG_NO_KERNELS

$(BUILD)/tests/progs/%: tests/progs/%.c $(SUITE_POLICY) $(FAKE_LIB) $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(TEST_LIBS) $(LDFLAGS_SAN)

# Libraries the test programs load themselves (dlopen, RTLD_LOCAL).
HELPER_SRC := $(wildcard tests/libs/*.c)
HELPER_LIB := $(HELPER_SRC:tests/libs/%.c=$(BUILD)/tests/libs/lib%.so)

$(BUILD)/tests/libs/lib%.so: tests/libs/%.c tests/libs/%.map tests/hold.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fvisibility=default -shared -Wl,--version-script=tests/libs/$*.map \
	    -o $@ $< -ldl $(LDFLAGS_SAN)

test: all $(SUITE_LIB) $(SUITE_CMD) $(FAKE_LIB) $(CHECK_BIN) $(PROG_BIN) $(HELPER_LIB)
	@tests/deps_graph.py shim
	@tests/hooks_doc.sh
	@python3 tests/doc_links.py
	@BUILD=$(BUILD) SAN_RUNTIME='$(SAN_RUNTIME)' tests/run.sh $(CHECK_BIN)

# The reference of hooked entry points, generated from the table (committed;
# tests/hooks_doc.sh fails `make test` when it is stale).
docs/hooks.md: shim/hooks.def tools/hooks_md.awk
	awk -f tools/hooks_md.awk shim/hooks.def > $@.tmp && mv $@.tmp $@

# Sanitizer runs: the runtime must come first in LD_PRELOAD.
asan:
	$(MAKE) BUILD=$(BUILD)/asan OPT=-O1 SAN='-fsanitize=address,undefined -fno-omit-frame-pointer' \
	    SAN_RUNTIME="$$($(CC) -print-file-name=libasan.so)" test
tsan:
	$(MAKE) BUILD=$(BUILD)/tsan OPT=-O1 SAN='-fsanitize=thread' \
	    SAN_RUNTIME="$$($(CC) -print-file-name=libtsan.so)" test

# ---- the reproduction, under the shim ----
# On a GPU machine the demo needs the fixture cubin and the C route (nvcc).
demo: all $(FAKE_LIB) $(BUILD)/tests/progs/scenario
	@if [ "$$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 2 ]; then \
	    $(MAKE) --no-print-directory -f tests/gpu/gpu.mk BUILD=$(BUILD) gpu-fixtures; fi
	@BUILD=$(BUILD) examples/demo.sh

# ---- the GPU suite (one GPU runs most cases; PyTorch for the PyTorch cases) ----
# CASES: case-name substrings, e.g. make test-gpu CASES="deepgemm 02_"
test-gpu: all
	tests/gpu/run.sh $(BUILD) $(CASES)

# ---- the man page, from --help ----
MAN := $(BUILD)/ctxguard.1
man: $(MAN)
$(MAN): $(CMD) share/man.sh
	share/man.sh $(CMD) $(VERSION) > $@

# ---- install ----
# SYSCONFDIR/ctxguard/policy.conf gets the default policy only when absent:
# an operator's (perhaps locked) policy is never overwritten.
# Everything but the system policy, which uninstall leaves too (an
# operator's file).
INSTALLED := lib/libctxguard.so bin/ctxguard include/ctxguard/policy.h \
	include/ctxguard/grouped_mm.h lib/pkgconfig/ctxguard.pc share/ctxguard/policy.conf \
	share/man/man1/ctxguard.1 share/bash-completion/completions/ctxguard share/ctxguard/report.py
install: all $(MAN)
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin \
	    $(DESTDIR)$(PREFIX)/include/ctxguard $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	    $(DESTDIR)$(PREFIX)/share/ctxguard $(DESTDIR)$(PREFIX)/share/man/man1 \
	    $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 644 $(MAN) $(DESTDIR)$(PREFIX)/share/man/man1/ctxguard.1
	install -m 644 share/ctxguard.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/ctxguard
	install -m 644 python/ctxguard/report.py $(DESTDIR)$(PREFIX)/share/ctxguard/report.py
	install -m 755 $(LIB) $(DESTDIR)$(PREFIX)/lib/libctxguard.so
	install -m 755 $(CMD) $(DESTDIR)$(PREFIX)/bin/ctxguard
	install -m 644 policy/policy.h $(DESTDIR)$(PREFIX)/include/ctxguard/policy.h
	install -m 644 policy/default.conf $(DESTDIR)$(PREFIX)/share/ctxguard/policy.conf
	install -d $(DESTDIR)$(SYSCONFDIR)/ctxguard
	[ -e $(DESTDIR)$(SYSCONFDIR)/ctxguard/policy.conf ] || \
	    install -m 644 policy/default.conf $(DESTDIR)$(SYSCONFDIR)/ctxguard/policy.conf
	$(if $(wildcard kernels/grouped_mm.h),install -m 644 kernels/grouped_mm.h $(DESTDIR)$(PREFIX)/include/ctxguard/grouped_mm.h)
	printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: ctxguard\nDescription: stops CUDA kernel launches that cross contexts\nVersion: $(VERSION)\nLibs: -L$${libdir} -lctxguard\nCflags: -I$${includedir}/ctxguard\n' '$(PREFIX)' \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/ctxguard.pc

uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/,$(INSTALLED))
	-rmdir $(DESTDIR)$(PREFIX)/include/ctxguard $(DESTDIR)$(PREFIX)/share/ctxguard 2>/dev/null

clean:
	rm -rf $(BUILD)
