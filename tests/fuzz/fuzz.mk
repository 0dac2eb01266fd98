# make fuzz: libFuzzer on the policy parser for FUZZ_SECONDS (default 60).
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz:
	BUILD=$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run.sh
