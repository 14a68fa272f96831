# SPDX-License-Identifier: MIT
#
# openmps build. `make` builds the daemon, the server and the client library
# under build/; `make test` builds and runs the CPU test suite (the software
# stand-in driver replaces the GPU); `make install PREFIX=...` installs.
#
# Each folder adds its own targets in a module.mk included below, so the tree
# and the build describe the same architecture.
#
#   make SANITIZE=address   ASan + UBSan build (under build-address/)
#   make SANITIZE=thread    TSan build (under build-thread/)
#   make WERROR=1           warnings are errors (CI)
#   make CC=clang           any C11 compiler with GNU extensions

CUDA_HOME ?= $(firstword $(wildcard /usr/local/cuda /usr/local/cuda-13.0 /usr/local/cuda-12.9 /usr/local/cuda-12.8 /usr/local/cuda-12.6 /usr/local/cuda-12.4))
PREFIX    ?= /usr/local
NVCC      ?= $(if $(wildcard $(CUDA_HOME)/bin/nvcc),$(CUDA_HOME)/bin/nvcc,nvcc)
SANITIZE  ?=
BUILD     ?= build$(if $(SANITIZE),-$(SANITIZE))

WARN      := -Wall -Wextra -Wstrict-prototypes -Wno-unused-parameter -Wshadow
CFLAGS    ?= -O2 -g
CFLAGS    += -std=c11 -D_GNU_SOURCE -fPIC -fvisibility=hidden $(WARN) $(if $(WERROR),-Werror) \
             -Isrc -I$(CUDA_HOME)/include
LDLIBS    += -lpthread -ldl
ifeq ($(SANITIZE),address)
CFLAGS    += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS   += -fsanitize=address,undefined
endif
ifeq ($(SANITIZE),thread)
CFLAGS    += -fsanitize=thread
LDFLAGS   += -fsanitize=thread
# What ThreadSanitizer cannot see (tests/tsan.supp says why).
export TSAN_OPTIONS := suppressions=$(CURDIR)/tests/tsan.supp $(TSAN_OPTIONS)
endif

.PHONY: all test install clean check-cuda
all:

# Modules append to these.
ALL_TARGETS :=
TEST_BINS   :=

include src/common/module.mk
include src/client/module.mk
include src/server/module.mk
include src/control/module.mk
include tests/standin/module.mk
include tests/module.mk
include bench/module.mk

all: check-cuda $(ALL_TARGETS)

check-cuda:
	@test -f $(CUDA_HOME)/include/cuda.h || { echo "openmps: the CUDA toolkit headers (>= 12.4) were not found; set CUDA_HOME" >&2; exit 1; }
	@v=$$(awk '/#define CUDA_VERSION /{print $$3}' $(CUDA_HOME)/include/cuda.h); \
	  test "$$v" -ge 12040 || { echo "openmps: CUDA headers $$v are older than 12.4" >&2; exit 1; }

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/obj/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/openmps
	install -m 755 $(BUILD)/bin/openmps-control $(BUILD)/bin/openmps-server $(DESTDIR)$(PREFIX)/bin/
	install -m 755 $(BUILD)/lib/libcuda.so.1 $(DESTDIR)$(PREFIX)/lib/openmps/
	ln -sf libcuda.so.1 $(DESTDIR)$(PREFIX)/lib/openmps/libcuda.so

clean:
	rm -rf build build-address build-thread

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

.PHONY: demo
demo:
	scripts/demo.sh
