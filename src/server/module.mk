# SPDX-License-Identifier: MIT
# src/server: openmps-server.
SERVER_SRCS := $(wildcard src/server/*.c) src/server/gen/forward.c
SERVER_OBJS := $(SERVER_SRCS:%.c=$(BUILD)/obj/%.o)

$(BUILD)/bin/openmps-server: $(SERVER_OBJS) $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

ALL_TARGETS += $(BUILD)/bin/openmps-server
