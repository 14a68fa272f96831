# SPDX-License-Identifier: MIT
#
# Unit tests of the private export tables (src/client/exports.c, cls.c,
# integrity.c, md2.c). The hooks those files need from the rest of the
# client library are faked inside test_exports.c, so the tests link only
# these four objects and the logger.

EXPORTS_TEST_BINS := $(BUILD)/tests/unit/test_md2 $(BUILD)/tests/unit/test_exports

$(BUILD)/tests/unit/test_md2: $(BUILD)/obj/tests/unit/test_md2.o \
		$(BUILD)/obj/src/client/md2.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/unit/test_exports: $(BUILD)/obj/tests/unit/test_exports.o \
		$(addprefix $(BUILD)/obj/src/client/,exports.o cls.o integrity.o md2.o) \
		$(BUILD)/obj/src/common/log.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

TEST_BINS += $(EXPORTS_TEST_BINS)
