# SPDX-License-Identifier: MIT
# test_sq: the submission queue against a mutex-protected reference queue.
$(BUILD)/tests/unit/test_sq: $(BUILD)/obj/tests/unit/test_sq.o $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

TEST_BINS += $(BUILD)/tests/unit/test_sq
