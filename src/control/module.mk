# SPDX-License-Identifier: MIT
# src/control: openmps-control, the control daemon and its command-line client.
CONTROL_SRCS := $(wildcard src/control/*.c)
CONTROL_OBJS := $(CONTROL_SRCS:%.c=$(BUILD)/obj/%.o)

$(BUILD)/bin/openmps-control: $(CONTROL_OBJS) $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

ALL_TARGETS += $(BUILD)/bin/openmps-control
