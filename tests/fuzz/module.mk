# SPDX-License-Identifier: MIT
#
# tests/fuzz: libFuzzer harnesses for the two parsers that face untrusted
# input, the server's message handling (fuzz_wire) and the control daemon's
# command language (fuzz_control). Built with clang whatever CC is, with ASan
# and UBSan, into $(BUILD)/fuzz/, with a copy of the stand-in driver built
# the same way (so the sanitizers see what the server hands the driver) and
# the seed corpora. Not part of `make test`.
#
#   make fuzz          the fuzzers, their stand-in, the seed corpora
#   make fuzz-smoke    each fuzzer for FUZZ_TIME seconds (60) over its seeds;
#                      fails on any crash, leak, hang or failed check
#
# By hand: $(BUILD)/fuzz/fuzz_wire -dict=tests/fuzz/wire.dict NEW_DIR \
#          $(BUILD)/fuzz/corpus/wire
# (a crash's input, given alone instead of the folders, is run once;
# FUZZ_WIRE_TRACE=1 prints each message and its answer). ASan keeps a record
# of every thread a process made, and the stand-in makes one per stream: for
# runs of hours add -fork=N, whose fuzzing processes come and go.

FUZZ_CC     ?= clang
FUZZ_TIME   ?= 60
FUZZ_DIR    := $(BUILD)/fuzz
FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS := -O1 -g -std=c11 -D_GNU_SOURCE -fPIC -fvisibility=hidden $(WARN) $(if $(WERROR),-Werror) \
               -Isrc -I$(CUDA_HOME)/include $(FUZZ_SAN)

# Coverage feedback for the code under test and the harnesses; the stand-in
# and the seed writers get the sanitizers only.
FUZZ_COV := -fsanitize=fuzzer-no-link
$(FUZZ_DIR)/obj/tests/standin/%.o: FUZZ_COV :=
$(FUZZ_DIR)/obj/tests/fuzz/seeds_%.o: FUZZ_COV :=

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_COV) -MMD -MP -c -o $@ $<

fuzz_objs = $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(1))

# The server without its main(), which the harness stands in for.
FUZZ_WIRE_OBJS    := $(call fuzz_objs,tests/fuzz/fuzz_wire.c $(filter-out src/server/main.c,$(SERVER_SRCS)) \
                                      $(COMMON_SRCS))
# The command language; the daemon around it is the harness's, in memory.
FUZZ_CONTROL_OBJS := $(call fuzz_objs,tests/fuzz/fuzz_control.c src/control/commands.c src/control/settings.c \
                                      src/control/listings.c src/control/pidview.c $(COMMON_SRCS))
FUZZ_STANDIN      := $(FUZZ_DIR)/standin/libcuda.so.1

$(FUZZ_DIR)/fuzz_wire: $(FUZZ_WIRE_OBJS)
	$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ -lpthread -ldl

$(FUZZ_DIR)/fuzz_control: $(FUZZ_CONTROL_OBJS)
	$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ -lpthread

# fuzz_wire finds it next to itself. The sanitizer runtime comes from the
# program that loads it.
$(FUZZ_STANDIN): $(call fuzz_objs,$(STANDIN_SRCS))
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -shared -fsanitize=address,undefined -Wl,-soname,libcuda.so.1 -Wl,-z,nodelete -Wl,-Bsymbolic \
		-o $@ $^ -lpthread -lm

$(FUZZ_DIR)/seeds_%: $(FUZZ_DIR)/obj/tests/fuzz/seeds_%.o
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^

.SECONDARY: $(FUZZ_DIR)/obj/tests/fuzz/seeds_wire.o $(FUZZ_DIR)/obj/tests/fuzz/seeds_control.o

$(FUZZ_DIR)/corpus/wire.stamp: $(FUZZ_DIR)/seeds_wire $(KERNELS_PTX)
	rm -rf $(FUZZ_DIR)/corpus/wire && mkdir -p $(FUZZ_DIR)/corpus/wire
	$(FUZZ_DIR)/seeds_wire $(FUZZ_DIR)/corpus/wire $(KERNELS_PTX)
	@touch $@

$(FUZZ_DIR)/corpus/control.stamp: $(FUZZ_DIR)/seeds_control
	rm -rf $(FUZZ_DIR)/corpus/control && mkdir -p $(FUZZ_DIR)/corpus/control
	$(FUZZ_DIR)/seeds_control $(FUZZ_DIR)/corpus/control
	@touch $@

.PHONY: fuzz fuzz-smoke
fuzz: $(FUZZ_DIR)/fuzz_wire $(FUZZ_DIR)/fuzz_control $(FUZZ_STANDIN) \
      $(FUZZ_DIR)/corpus/wire.stamp $(FUZZ_DIR)/corpus/control.stamp

# New inputs go to work/, the seeds stay as they are; a crash's input goes
# to artifacts/. -timeout: no input may take this long (a hang).
FUZZ_RUN = -max_total_time=$(FUZZ_TIME) -timeout=20 -print_final_stats=1 -print_funcs=0 \
           -artifact_prefix=$(FUZZ_DIR)/artifacts/

fuzz-smoke: fuzz
	@rm -rf $(FUZZ_DIR)/work && mkdir -p $(FUZZ_DIR)/work/wire $(FUZZ_DIR)/work/control $(FUZZ_DIR)/artifacts
	$(FUZZ_DIR)/fuzz_wire $(FUZZ_RUN) -dict=tests/fuzz/wire.dict $(FUZZ_DIR)/work/wire \
		$(FUZZ_DIR)/corpus/wire
	$(FUZZ_DIR)/fuzz_control $(FUZZ_RUN) -dict=tests/fuzz/control.dict $(FUZZ_DIR)/work/control \
		$(FUZZ_DIR)/corpus/control

-include $(shell find $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)
