# SPDX-License-Identifier: MIT
#
# test_procaddr: cuGetProcAddress resolution and the generated symbol tables.

$(BUILD)/tests/unit/test_procaddr: $(BUILD)/obj/tests/unit/test_procaddr.o \
                                   $(BUILD)/obj/src/client/procaddr.o \
                                   $(BUILD)/obj/src/client/gen/procaddr_table.o \
                                   $(BUILD)/obj/src/client/gen/symbols.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

TEST_BINS += $(BUILD)/tests/unit/test_procaddr
