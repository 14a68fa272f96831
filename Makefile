# SPDX-License-Identifier: MIT
#
# openmps build. `make` builds the daemon, the server and the client library
# under build/; `make test` builds and runs the CPU test suite (the software
# stand-in driver replaces the GPU); `make install PREFIX=...` installs and
# `make uninstall PREFIX=...` removes what it installed.
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

.PHONY: all test install uninstall clean check-cuda
all:

# Modules append to these.
ALL_TARGETS :=
TEST_BINS   :=
TESTS_SERIAL :=

include src/common/module.mk
include src/client/module.mk
include src/server/module.mk
include src/control/module.mk
include src/deviceplugin/module.mk
include src/nvml/module.mk
include src/smi/module.mk
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

# What `make install` puts where (DESTDIR for staging, PREFIX for the place):
# the two programs; the client library in lib/openmps (a program picks it by
# LD_LIBRARY_PATH); the stand-in driver in lib/openmps/standin, for trying
# openmps without a GPU (OPENMPS_DRIVER); the man pages; the systemd unit;
# the Slurm examples. With MPS_NAMES=1 also NVIDIA's program names as links
# to ours (bin/nvidia-cuda-mps-control, bin/nvidia-cuda-mps-server), for
# engines that run NVIDIA's daemon by name (Kubernetes device plugins);
# under that name the daemon takes NVIDIA's default directories. `make
# uninstall` removes each of them (the links only where they are ours).
VERSION   := $(shell sed -n 's/.*OPENMPS_VERSION "\(.*\)"/\1/p' src/common/version.h)
SYSTEMD_UNIT_DIR ?= $(PREFIX)/lib/systemd/system
I         := $(DESTDIR)$(PREFIX)
INSTALLED := $(I)/bin/openmps-control $(I)/bin/openmps-server $(I)/bin/openmps-device-plugin $(I)/lib/openmps/libcuda.so.1 $(I)/lib/openmps/nvml/libnvidia-ml.so.1 $(I)/lib/openmps/nvml/nvidia-smi \
             $(I)/lib/openmps/libcuda.so $(I)/lib/openmps/standin/libcuda.so.1 \
             $(I)/share/man/man1/openmps-control.1 $(I)/share/man/man8/openmps-server.8 \
             $(I)/share/man/man8/openmps-device-plugin.8 \
             $(I)/share/man/man7/openmps.7 $(DESTDIR)$(SYSTEMD_UNIT_DIR)/openmps.service \
             $(addprefix $(I)/share/doc/openmps/slurm/,prolog.sh prolog_task.sh epilog.sh)

install: all $(STANDIN_LIB)
	install -d $(I)/bin $(I)/lib/openmps/standin $(I)/share/man/man1 $(I)/share/man/man7 $(I)/share/man/man8 \
		$(DESTDIR)$(SYSTEMD_UNIT_DIR) $(I)/share/doc/openmps/slurm
	install -m 755 $(BUILD)/bin/openmps-control $(BUILD)/bin/openmps-server $(I)/bin/
	if [ -x $(BUILD)/bin/openmps-device-plugin ]; then \
		install -m 755 $(BUILD)/bin/openmps-device-plugin $(I)/bin/ && \
		sed 's/@VERSION@/$(VERSION)/' packaging/man/openmps-device-plugin.8 \
			>$(I)/share/man/man8/openmps-device-plugin.8 || exit 1; \
	fi
	install -m 755 $(BUILD)/lib/libcuda.so.1 $(I)/lib/openmps/
	ln -sf libcuda.so.1 $(I)/lib/openmps/libcuda.so
	install -d $(I)/lib/openmps/nvml
	install -m 755 $(NVML_LIB) $(SMI_BIN) $(I)/lib/openmps/nvml/
	install -m 755 $(STANDIN_LIB) $(I)/lib/openmps/standin/libcuda.so.1
	for m in openmps-control.1:man1 openmps-server.8:man8 openmps.7:man7; do \
		sed 's/@VERSION@/$(VERSION)/' packaging/man/$${m%%:*} >$(I)/share/man/$${m#*:}/$${m%%:*} || exit 1; \
	done
	sed 's|@PREFIX@|$(PREFIX)|g' packaging/systemd/openmps.service >$(DESTDIR)$(SYSTEMD_UNIT_DIR)/openmps.service
	install -m 755 packaging/slurm/prolog.sh packaging/slurm/prolog_task.sh packaging/slurm/epilog.sh \
		$(I)/share/doc/openmps/slurm/
	if [ "$(MPS_NAMES)" = 1 ]; then \
		for n in control server; do \
			t=$(I)/bin/nvidia-cuda-mps-$$n; \
			if [ -e "$$t" ] && [ "$$(readlink "$$t")" != openmps-$$n ]; then \
				echo "make install: $$t exists and is not openmps's link: left as it is" >&2; exit 1; \
			fi; \
			ln -sf openmps-$$n "$$t" || exit 1; \
		done; \
	fi

uninstall:
	rm -f $(INSTALLED)
	for n in control:nvidia-cuda-mps-control server:nvidia-cuda-mps-server; do \
		[ "$$(readlink $(I)/bin/$${n#*:} 2>/dev/null)" = "openmps-$${n%%:*}" ] && rm -f $(I)/bin/$${n#*:}; \
	done; true
	-rmdir $(I)/lib/openmps/standin $(I)/lib/openmps/nvml $(I)/lib/openmps $(I)/share/doc/openmps/slurm $(I)/share/doc/openmps 2>/dev/null

clean:
	rm -rf build build-address build-thread

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

.PHONY: demo
demo:
	scripts/demo.sh
