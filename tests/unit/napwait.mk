# SPDX-License-Identifier: MIT
# test_napwait: how long a client's wait for the GPU may nap, from its recent waits.
$(BUILD)/tests/unit/test_napwait: $(BUILD)/obj/tests/unit/test_napwait.o $(BUILD)/obj/src/client/napwait.o $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

TEST_BINS += $(BUILD)/tests/unit/test_napwait
