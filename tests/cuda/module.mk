# SPDX-License-Identifier: MIT
#
# tests/cuda: standalone driver-API test programs. Each links only against the
# toolkit's stub libcuda (SONAME libcuda.so.1), so one binary runs on the real
# driver, under openmps on a GPU, and under openmps on the software stand-in;
# LD_LIBRARY_PATH picks which libcuda.so.1 it meets. The kernels are read at
# run time from the PTX of tests/kernels/kernels.cu ($(BUILD)/tests/kernels.ptx,
# built by tests/standin/module.mk; OPENMPS_TEST_PTX or argv[1] override).
#
# `make tests-cuda` builds them; TESTS_CUDA lists them for the test runner.

TESTS_CUDA_NAMES := t_device t_context t_memory t_module t_launch t_stream t_event \
                    t_threads t_multictx t_graph t_gnodes t_hostfn t_hostreg t_memops t_exports t_vmm t_pool t_peer \
                    t_managed t_migrate t_link t_array t_queries t_tensormap t_replay t_printf t_logs
TESTS_CUDA_BINS  := $(addprefix $(BUILD)/tests/cuda/,$(TESTS_CUDA_NAMES))
TESTS_CUDA_LIBS  := -L$(CUDA_HOME)/lib64/stubs -lcuda -lm

TESTS_CUDA += $(TESTS_CUDA_BINS)
# Alone: t_event checks elapsed times against the host clock, t_memops how
# soon a synchronize returns once its stream is let go.
TESTS_SERIAL += t_event t_memops

$(TESTS_CUDA_BINS): $(BUILD)/tests/cuda/%: $(BUILD)/obj/tests/cuda/%.o $(BUILD)/obj/tests/cuda/common.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(TESTS_CUDA_LIBS) $(LDLIBS)

.PHONY: tests-cuda
tests-cuda: $(TESTS_CUDA_BINS)
