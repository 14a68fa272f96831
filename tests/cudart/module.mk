# SPDX-License-Identifier: MIT
# tests/cudart: programs written against the CUDA runtime (static cudart),
# built by nvcc for PTX only with the PTX left uncompressed, so that the
# stand-in driver can run their kernels: cudart's own way of reaching the
# driver (export tables, lazy loading from any thread) is then tested in CI,
# not only on a GPU. nvcc needs a C++ host compiler; without one the
# programs are not built and tests/cudart/cudart.sh reports them skipped.

CUDART_NAMES := r_threads r_runtime
CUDART_BINS  := $(addprefix $(BUILD)/tests/cudart/,$(CUDART_NAMES))
# The same program with a per-thread default stream (cudart then calls the
# driver's _ptsz/_ptds entry points).
CUDART_PTDS  := $(addsuffix _ptds,$(CUDART_BINS))
CUDART_CXX   := $(shell command -v g++ 2>/dev/null || command -v c++ 2>/dev/null)

ifneq ($(CUDART_CXX),)
$(CUDART_BINS): $(BUILD)/tests/cudart/%: tests/cudart/%.cu tests/cudart/codes.h tests/check.h tests/kernels/kernels.cu tests/kernels/long_name.h
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -ccbin $(CUDART_CXX) -gencode arch=compute_90,code=compute_90 -Xfatbin -compress=false \
		-o $@ $<

$(CUDART_PTDS): $(BUILD)/tests/cudart/%_ptds: tests/cudart/%.cu tests/cudart/codes.h tests/check.h tests/kernels/kernels.cu tests/kernels/long_name.h
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -ccbin $(CUDART_CXX) -gencode arch=compute_90,code=compute_90 -Xfatbin -compress=false \
		--default-stream per-thread -o $@ $<

TEST_DEPS_EXTRA += $(CUDART_BINS) $(CUDART_PTDS)
endif
TEST_SCRIPTS += tests/cudart/cudart.sh
