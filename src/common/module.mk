# SPDX-License-Identifier: MIT
# src/common: code shared by the client library, the server and the daemon.
COMMON_SRCS := $(wildcard src/common/*.c)
COMMON_OBJS := $(COMMON_SRCS:%.c=$(BUILD)/obj/%.o)
