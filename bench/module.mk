# SPDX-License-Identifier: MIT
#
# bench: the benchmark programs that bench/run.sh and bench/infer.sh run
# natively, under NVIDIA MPS and under openmps. Like tests/cuda they link
# only against the toolkit's stub libcuda and read the kernels' PTX at run
# time, so the same binaries serve all three columns. `make bench` builds them.

BENCH_NAMES := spin launch copy idle clients calls hold trips mtlaunch latency hostmem drvcost queries serve execcost alloccost
BENCH_BINS  := $(addprefix $(BUILD)/bench/,$(BENCH_NAMES))

$(BENCH_BINS): $(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(BUILD)/obj/bench/bench.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -L$(CUDA_HOME)/lib64/stubs -lcuda $(LDLIBS)

# A sampling profiler preloaded by bench/cpuprofile.py (no driver calls).
BENCH_PROF := $(BUILD)/bench/libcpuprof.so

$(BENCH_PROF): $(BUILD)/obj/bench/cpuprof.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared -o $@ $^ -ldl $(LDLIBS)

.PHONY: bench
bench: $(BENCH_BINS) $(BENCH_PROF)

# The benchmark's tables and summaries are checked by make test.
TEST_SCRIPTS += bench/selftest.sh
