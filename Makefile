# lean — build. `make` builds the library, the CLI and the tests; `make test` runs them.
# Sources are found by directory, so adding a file needs no edit here:
#   src/core/*.c src/cpu/*.c -> liblean.a / liblean.so
#   cli/*.c                  -> build/lean
#   tests/test_*.c           -> build/tests/test_* (each its own program, + tests/testlib.c)

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
CFLAGS  ?=
WARN     = -Wall -Wextra -Werror
BASE     = -std=c11 $(OPT) -g $(WARN) -D_DEFAULT_SOURCE -fvisibility=hidden -Iinclude -Isrc/core -Isrc/cpu
LIBS     = -lm -lpthread

CORE_SRC = $(wildcard src/core/*.c)
CPU_SRC  = $(wildcard src/cpu/*.c)
LIB_SRC  = $(CORE_SRC) $(CPU_SRC)
CLI_SRC  = $(wildcard cli/*.c)
TEST_SRC = $(wildcard tests/test_*.c)

LIB_OBJ  = $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
PIC_OBJ  = $(LIB_SRC:%.c=$(BUILD)/pic/%.o)
CLI_OBJ  = $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TESTS    = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all lib cli tests test asan wasm test-wasm fuzz clean
all: lib cli tests
lib: $(BUILD)/liblean.a $(BUILD)/liblean.so
cli: $(BUILD)/lean
tests: $(TESTS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(BUILD)/liblean.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/liblean.so: $(PIC_OBJ)
	$(CC) -shared $(CFLAGS) -o $@ $^ $(LIBS)
$(BUILD)/lean: $(CLI_OBJ) $(BUILD)/liblean.a
	$(CC) $(CFLAGS) -o $@ $^ $(LIBS)
$(BUILD)/tests/%: tests/%.c tests/testlib.c tests/test.h $(BUILD)/liblean.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -Itests -o $@ $< tests/testlib.c $(BUILD)/liblean.a $(LIBS)

# The whole suite: native, sanitizers, wasm, fuzzing, parity. Prints "N passed, N failed".
test: all
	bash tests/run.sh

# Unit tests under ASan + UBSan (clang), in their own build directory.
asan:
	$(MAKE) BUILD=build-asan CC=clang OPT=-O1 \
	  CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" tests

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

clean:
	rm -rf build build-asan build-wasm build-fuzz
