# SPDX-License-Identifier: MIT
# src/smi: nvidia-smi for pods that reach the GPU through openmps alone,
# installed beside openmps's NVML (lib/openmps/nvml), where the CDI spec and
# the device plugin mount it as /usr/bin/nvidia-smi.
SMI_BIN := $(BUILD)/lib/nvml/nvidia-smi

$(SMI_BIN): $(BUILD)/obj/src/smi/smi.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -ldl

ALL_TARGETS += $(SMI_BIN)
