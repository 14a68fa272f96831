# SPDX-License-Identifier: MIT
# test_memacct: the server's account of each client's memory (ranges, limits, the view of free memory).
$(BUILD)/tests/unit/test_memacct: $(BUILD)/obj/tests/unit/test_memacct.o $(BUILD)/obj/src/server/memacct.o $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

TEST_BINS += $(BUILD)/tests/unit/test_memacct
