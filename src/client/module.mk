# SPDX-License-Identifier: MIT
# src/client: the client library, libcuda.so.1. It exports the CUDA driver
# API (the asm stubs in gen/) and nothing else of ours but the marker symbol
# that tells it from a real driver; everything is built hidden. The driver's
# private export tables, which NVIDIA's libraries call behind the API, live
# in src/client/exports/.
include src/client/gen/module.mk

CLIENT_SRCS := $(wildcard src/client/*.c src/client/exports/*.c)
CLIENT_OBJS := $(CLIENT_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/src/client/resolve.o \
               $(BUILD)/obj/src/client/exports/driver_fwd.o $(CLIENT_GEN_OBJS)

$(BUILD)/lib/libcuda.so.1: $(CLIENT_OBJS) $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic-functions -Wl,-z,defs \
		-o $@ $^ $(LDLIBS)

$(BUILD)/lib/libcuda.so: $(BUILD)/lib/libcuda.so.1
	ln -sf libcuda.so.1 $@

ALL_TARGETS += $(BUILD)/lib/libcuda.so.1 $(BUILD)/lib/libcuda.so
