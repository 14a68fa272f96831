# SPDX-License-Identifier: MIT
# test_gpuwake: the service threads' wake of clients asleep on words the GPU stores.
$(BUILD)/tests/unit/test_gpuwake: $(BUILD)/obj/tests/unit/test_gpuwake.o $(BUILD)/obj/src/server/gpuwake.o $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

TEST_BINS += $(BUILD)/tests/unit/test_gpuwake
