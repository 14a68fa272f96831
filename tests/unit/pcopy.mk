# SPDX-License-Identifier: MIT
# test_pcopy: the client library's parallel memcpy, with several threads forced.
$(BUILD)/tests/unit/test_pcopy: $(BUILD)/obj/tests/unit/test_pcopy.o $(BUILD)/obj/src/client/pcopy.o $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

TEST_BINS += $(BUILD)/tests/unit/test_pcopy
