# SPDX-License-Identifier: MIT
#
# tests/standin: the software stand-in for the CUDA driver, a libcuda.so.1
# that openmps-server can load (OPENMPS_DRIVER) when there is no GPU, and its
# test. Also builds the PTX of the shared test kernels, which the stand-in
# runs through C twins.
#
#   STANDIN_LIB   the library, for tests that start a server on it
#   KERNELS_PTX   tests/kernels/kernels.cu as PTX, for tests that load it
#   PRINTF_PTX    tests/kernels/printf.cu as PTX (a kernel that prints), beside it

STANDIN_SRCS := $(filter-out tests/standin/test_standin.c,$(wildcard tests/standin/*.c))
STANDIN_OBJS := $(STANDIN_SRCS:%.c=$(BUILD)/obj/%.o)
STANDIN_LIB  := $(BUILD)/lib/standin/libcuda.so.1
KERNELS_PTX  := $(BUILD)/tests/kernels.ptx
PRINTF_PTX   := $(BUILD)/tests/printf.ptx
STANDIN_TEST := $(BUILD)/tests/standin/test_standin
# It times copies and waits against the clock: it runs alone (tests/module.mk).
TESTS_SERIAL += test_standin

# Only the CUDA API leaves the library: everything else is hidden, and the
# API functions are marked visible in the source.
$(STANDIN_OBJS): CFLAGS += -fvisibility=hidden

# nodelete: stream threads may still be parked in the library when a
# dlopen()ing program calls dlclose(). -Bsymbolic: the library's calls to its
# own API (cuMemAllocPitch -> cuMemAlloc) stay inside it even in a process
# where another libcuda.so.1 (the openmps client) was loaded first.
STANDIN_LDFLAGS := -shared -Wl,-soname,libcuda.so.1 -Wl,-z,nodelete -Wl,-Bsymbolic
ifeq ($(SANITIZE),)
STANDIN_LDFLAGS += -Wl,--no-undefined
endif

$(STANDIN_LIB): $(STANDIN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(STANDIN_LDFLAGS) -o $@ $^ -lpthread -lm

$(KERNELS_PTX): tests/kernels/kernels.cu tests/kernels/long_name.h
	@mkdir -p $(dir $@)
	$(NVCC) -ptx -arch=compute_90 -o $@ $<

$(PRINTF_PTX): tests/kernels/printf.cu
	@mkdir -p $(dir $@)
	$(NVCC) -ptx -arch=compute_90 -o $@ $<

# The test dlopen()s the library and loads the PTX; it finds both through
# STANDIN_LIB/STANDIN_PTX, or next to itself when run without them.
$(STANDIN_TEST): $(BUILD)/obj/tests/standin/test_standin.o | $(STANDIN_LIB) $(KERNELS_PTX)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lm

ALL_TARGETS += $(STANDIN_LIB)
TESTS       += $(STANDIN_TEST)

.PHONY: test-standin
test-standin: $(STANDIN_TEST) $(STANDIN_LIB) $(KERNELS_PTX)
	STANDIN_LIB=$(STANDIN_LIB) STANDIN_PTX=$(KERNELS_PTX) $(STANDIN_TEST)
