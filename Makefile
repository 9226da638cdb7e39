# sbx: one binary, linked against libc, jansson and libseccomp only.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
PKG_CONFIG ?= pkg-config
WERROR ?= 1
BUILD ?= build
CFLAGS ?= -O2 -g

# on a fresh machine, get what is missing first (scripts/install-deps)
DEPS_OK := $(shell $(PKG_CONFIG) --exists jansson libseccomp libcurl libarchive 2>/dev/null && echo yes)
ifneq ($(DEPS_OK),yes)
ifeq ($(filter clean,$(MAKECMDGOALS)),)
$(info sbx: build dependencies are missing; running scripts/install-deps)
DEPS_RUN := $(shell scripts/install-deps >&2 && echo ok)
ifneq ($(DEPS_RUN),ok)
$(error missing build dependencies: run the command printed above, then 'make' again)
endif
endif
endif

DEPS_CFLAGS := $(shell $(PKG_CONFIG) --cflags libarchive libcurl jansson libseccomp 2>/dev/null)
# libcurl and libarchive are dlopen'ed by core/lazy.c: never linked (DESIGN.md §2)
DEPS_LIBS := $(shell $(PKG_CONFIG) --libs jansson libseccomp 2>/dev/null) -ldl -pthread
WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wvla \
	-Wno-unused-parameter -Wno-missing-field-initializers $(if $(filter 1,$(WERROR)),-Werror)
VERSION := 0.1.0
COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
DEFS := -DSBX_VERSION='"$(VERSION)"' -DSBX_COMMIT='"$(COMMIT)"'

ifdef SANITIZE
BUILD := build-san
CFLAGS += -O1 -fno-omit-frame-pointer -fsanitize=$(SANITIZE) -fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SANITIZE)
endif

CORE_SRC := $(wildcard core/*.c)
PROV_SRC := $(wildcard providers/*.c providers/local/*.c)
CMD_SRC := $(wildcard cmd/*.c)
LIB_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(CORE_SRC) $(PROV_SRC))
CMD_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(CMD_SRC))
UNIT_SRC := $(wildcard tests/unit/*.c)
UNIT_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(UNIT_SRC))
MAN_SRC := $(wildcard man/*.scd)
MAN_OUT := $(MAN_SRC:.scd=)

.PHONY: all test check-san man install uninstall lint lint-tools lint-format lint-banned lint-shell clean \
	demo bench

all: $(BUILD)/sbx $(BUILD)/unit

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) -std=gnu11 $(WARN) $(CFLAGS) $(DEFS) $(DEPS_CFLAGS) -I. -MMD -MP -c $< -o $@

# sbx exec starts a command through this small static program, run from a sealed memfd, so the
# process that executes a sandbox's file is never the sbx binary (CVE-2019-5736); no libc
TRAMPOLINE := $(BUILD)/sbx-exec-trampoline
TRAMPOLINE_FLAGS := -std=gnu11 -Os -static -nostdlib -nostartfiles -ffreestanding \
	-fno-tree-loop-distribute-patterns -fno-stack-protector -fno-asynchronous-unwind-tables \
	-fno-unwind-tables -fno-pie -no-pie -Wl,--build-id=none -Wl,-z,noseparate-code \
	-Wl,-z,noexecstack -s
$(TRAMPOLINE): providers/local/trampoline/exec.c
	@mkdir -p $(@D)
	@echo "  CC      $< (static, no libc)"
	@$(CC) $(TRAMPOLINE_FLAGS) $(WARN) -o $@ $<
$(BUILD)/providers/local/exec.o: $(TRAMPOLINE)
$(BUILD)/providers/local/exec.o: DEFS += -DSBX_TRAMPOLINE='"$(TRAMPOLINE)"'
# a gVisor sandbox's first process (its init inside gVisor), built the same way
GINIT := $(BUILD)/sbx-ginit
$(GINIT): providers/local/trampoline/ginit.c
	@mkdir -p $(@D)
	@echo "  CC      $< (static, no libc)"
	@$(CC) $(TRAMPOLINE_FLAGS) $(WARN) -o $@ $<
$(BUILD)/providers/local/gvisor-runsc.o: $(GINIT)
$(BUILD)/providers/local/gvisor-runsc.o: DEFS += -DSBX_GINIT='"$(GINIT)"'

$(BUILD)/sbx: $(CMD_OBJ) $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(DEPS_LIBS)

$(BUILD)/unit: $(UNIT_OBJ) $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(DEPS_LIBS)

# the tests' own tools (servers, a browser, shells for the completions) are checked here too
test: all
	@scripts/install-deps || echo "sbx: test tools are missing; the tests that need them skip"
	tests/run.sh $(BUILD)/sbx $(BUILD)/unit

check-san:
	$(MAKE) SANITIZE=address,undefined all
	@scripts/install-deps || echo "sbx: test tools are missing; the tests that need them skip"
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		tests/run.sh build-san/sbx build-san/unit

demo: all
	scripts/demo $(BUILD)/sbx

bench: all
	bench/run $(BUILD)/sbx

man: $(MAN_OUT)

man/%: man/%.scd
	scdoc < $< > $@

install: all
	install -Dm755 $(BUILD)/sbx $(DESTDIR)$(BINDIR)/sbx
	for m in $(MAN_OUT); do install -Dm644 $$m $(DESTDIR)$(MANDIR)/man$${m##*.}/$${m##*/}; done
	install -Dm644 completions/sbx.bash $(DESTDIR)$(BASHCOMPDIR)/sbx
	install -Dm644 completions/_sbx $(DESTDIR)$(ZSHCOMPDIR)/_sbx
	install -Dm644 completions/sbx.fish $(DESTDIR)$(FISHCOMPDIR)/sbx.fish

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/sbx $(DESTDIR)$(BASHCOMPDIR)/sbx $(DESTDIR)$(ZSHCOMPDIR)/_sbx \
		$(DESTDIR)$(FISHCOMPDIR)/sbx.fish
	for m in $(MAN_OUT); do rm -f $(DESTDIR)$(MANDIR)/man$${m##*.}/$${m##*/}; done

# every C source and header, wherever it sits below these folders; every shell script
LINT_C := $(shell find core providers cmd tests/unit tests/fuzz -name '*.[ch]' 2>/dev/null | sort)
LINT_SH := tests/*.sh tests/fuzz/run.sh tests/helpers/*.sh scripts/* bench/* .ci/run completions/sbx.bash

# lint fails on any finding: a layout other than .clang-format's, a banned call (STYLE.md §7),
# a shellcheck note; 'make -k lint' reports all three kinds at once
lint: lint-format lint-banned lint-shell

# clang-format and shellcheck come with scripts/install-deps, like the tests' tools
lint-tools:
	@command -v clang-format >/dev/null && command -v shellcheck >/dev/null || scripts/install-deps

lint-format: lint-tools
	@echo "  FORMAT  $(words $(LINT_C)) C files"
	@clang-format --dry-run --Werror $(LINT_C)

lint-banned: lint-tools
	@echo "  BANNED  $(words $(LINT_C)) C files"
	@scripts/lint-banned $(LINT_C)

lint-shell: lint-tools
	@echo "  SHCHECK $(words $(wildcard $(LINT_SH))) shell scripts"
	@shellcheck -x $(LINT_SH)

clean:
	rm -rf build build-san

# libFuzzer harnesses (clang): make fuzz, and a short run of each in make test
-include tests/fuzz/fuzz.mk

-include $(LIB_OBJ:.o=.d) $(CMD_OBJ:.o=.d) $(UNIT_OBJ:.o=.d)
