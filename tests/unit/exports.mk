# SPDX-License-Identifier: MIT
#
# Unit tests of the private export tables (src/client/exports/: the tables,
# cls.c, integrity.c, md2.c). The hooks those files need from the rest of the
# client library are faked inside test_exports.c, so the tests link only
# these objects, the driver finder and the logger. The real driver the
# tables may be served with is fake_driver.c, built as fakedrv/libcuda.so.1
# beside the test.

EXPORTS_TEST_BINS := $(BUILD)/tests/unit/test_md2 $(BUILD)/tests/unit/test_exports
EXPORTS_TEST_OBJS := $(addprefix $(BUILD)/obj/src/client/exports/,lookup.o cudart.o tools.o \
		       driver.o driver_fwd.o cls.o integrity.o md2.o) \
		     $(BUILD)/obj/src/common/log.o $(BUILD)/obj/src/common/driver_path.o

$(BUILD)/tests/unit/test_md2: $(BUILD)/obj/tests/unit/test_md2.o \
		$(BUILD)/obj/src/client/exports/md2.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/unit/test_exports: $(BUILD)/obj/tests/unit/test_exports.o $(EXPORTS_TEST_OBJS) \
		| $(BUILD)/tests/unit/fakedrv/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/unit/fakedrv/libcuda.so.1: $(BUILD)/obj/tests/unit/fake_driver.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libcuda.so.1 -o $@ $^

TEST_BINS += $(EXPORTS_TEST_BINS)
