# SPDX-License-Identifier: MIT
# tests/system: whole-system tests. The s_* programs run as clients of a
# fresh daemon like the driver-API tests (several processes, a client killed
# mid-stream, a hostile client); the scripts set up their own daemons.

SYSTEM_NAMES := s_clients s_kill s_malformed s_burst s_passthrough
SYSTEM_BINS  := $(addprefix $(BUILD)/tests/system/,$(SYSTEM_NAMES))

$(SYSTEM_BINS): $(BUILD)/tests/system/%: $(BUILD)/obj/tests/system/%.o $(BUILD)/obj/tests/cuda/common.o $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -L$(CUDA_HOME)/lib64/stubs -lcuda -lm $(LDLIBS)

TESTS_CUDA   += $(filter-out %/s_passthrough,$(SYSTEM_BINS))
TEST_DEPS_EXTRA += $(BUILD)/tests/system/s_passthrough
TEST_SCRIPTS += tests/system/passthrough.sh tests/system/peercred.sh
