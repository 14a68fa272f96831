# SPDX-License-Identifier: MIT
# test_visible: CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, read as the real driver reads them.
$(BUILD)/tests/unit/test_visible: $(BUILD)/obj/tests/unit/test_visible.o $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

TEST_BINS += $(BUILD)/tests/unit/test_visible
