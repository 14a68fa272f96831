# SPDX-License-Identifier: MIT
# src/nvml: libnvidia-ml.so.1 for containers that reach the GPU through
# openmps alone, in a directory of its own (lib/nvml) that only openmps's
# CDI spec and device plugin put on LD_LIBRARY_PATH.
NVML_LIB := $(BUILD)/lib/nvml/libnvidia-ml.so.1

NVML_OBJS := $(BUILD)/obj/src/nvml/nvml.o $(BUILD)/obj/src/nvml/procs.o $(BUILD)/obj/src/common/paths.o \
             $(BUILD)/obj/src/common/sock.o $(BUILD)/obj/src/common/reply.o

$(NVML_LIB): $(NVML_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libnvidia-ml.so.1 -Wl,--no-undefined -o $@ $^ -lpthread -ldl

ALL_TARGETS += $(NVML_LIB)
