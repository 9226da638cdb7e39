# libFuzzer harnesses, included by the Makefile. Every tests/fuzz/fuzz_NAME.c is one binary,
# $(FUZZ_BUILD)/fuzz/fuzz_NAME, linked against core/ and providers/ built with clang and the
# sanitizers in $(FUZZ_BUILD)/ (libcurl and libarchive stay dlopen'ed, as in sbx).
#   make fuzz          each harness for FUZZ_SECONDS on a copy of tests/fuzz/corpus/fuzz_NAME/
#   make fuzz-smoke    each for FUZZ_SMOKE_SECONDS (make test runs this through tests/run.sh)
#   make fuzz-build    only the binaries
# A crash keeps its input in $(FUZZ_BUILD)/artifacts/fuzz_NAME/ and fails the target.
FUZZ_CC ?= clang
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 3
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS := -std=gnu11 -g -O1 -fno-omit-frame-pointer $(WARN) $(DEFS) $(DEPS_CFLAGS) -I.

FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(patsubst tests/fuzz/%.c,$(FUZZ_BUILD)/fuzz/%,$(FUZZ_SRC))
FUZZ_LIB_OBJ := $(patsubst %.c,$(FUZZ_BUILD)/%.o,$(CORE_SRC) $(PROV_SRC))

.PHONY: fuzz fuzz-smoke fuzz-build fuzz-deps fuzz-clean

fuzz-build: $(FUZZ_BIN)

# clang and its libFuzzer runtime: scripts/install-deps gets them when the probe fails
fuzz-deps:
	@printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' | \
		$(FUZZ_CC) -fsanitize=fuzzer -x c - -o /dev/null 2>/dev/null || scripts/install-deps

$(FUZZ_LIB_OBJ): $(FUZZ_BUILD)/%.o: %.c | fuzz-deps
	@mkdir -p $(@D)
	@echo "  FUZZCC  $<"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/fuzz/%: tests/fuzz/%.c $(FUZZ_LIB_OBJ) | fuzz-deps
	@mkdir -p $(@D)
	@echo "  FUZZLD  $@"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer -MMD -MP -MF $@.d $< \
		$(FUZZ_LIB_OBJ) $(DEPS_LIBS) -o $@

fuzz: fuzz-build
	tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_BIN)

fuzz-smoke: fuzz-build
	tests/fuzz/run.sh $(FUZZ_SMOKE_SECONDS) $(FUZZ_BIN)

fuzz-clean:
	rm -rf $(FUZZ_BUILD)

clean: fuzz-clean

# make test: the binaries are built first, and tests/run.sh runs each for a few seconds
test: fuzz-build
test: export FUZZ_DIR = $(abspath $(FUZZ_BUILD)/fuzz)
test: export FUZZ_SMOKE_SECONDS := $(FUZZ_SMOKE_SECONDS)

-include $(FUZZ_LIB_OBJ:.o=.d) $(FUZZ_BIN:=.d)
