# make fuzz: libFuzzer on the policy parser for FUZZ_SECONDS (default 60),
# then on the redirect's decode against DeepGEMM's semantics for
# FUZZ_DECODE_SECONDS (default 30).
FUZZ_SECONDS ?= 60
FUZZ_DECODE_SECONDS ?= 30
.PHONY: fuzz
fuzz:
	BUILD=$(BUILD) CUDA=$(CUDA) FUZZ_SECONDS=$(FUZZ_SECONDS) \
	    FUZZ_DECODE_SECONDS=$(FUZZ_DECODE_SECONDS) tests/fuzz/run.sh
