# SPDX-License-Identifier: MIT
#
# Generated tables of the client library: the exported-symbol enum and names, one asm stub per
# exported driver function, and the cuGetProcAddress resolution table. They are committed; the
# build compiles them and never runs the generator. After a toolkit update, `make regen-symbols`
# rewrites them from $(CUDA_HOME) (the stub libcuda.so and the *Typedefs.h headers).

CLIENT_GEN_OBJS := $(BUILD)/obj/src/client/gen/symbols.o \
                   $(BUILD)/obj/src/client/gen/stubs.o \
                   $(BUILD)/obj/src/client/gen/procaddr_table.o \
                   $(BUILD)/obj/src/client/gen/forward.o

.PHONY: regen-symbols
regen-symbols:
	python3 tools/gen-symbols.py --cuda-home $(CUDA_HOME)

# The forwarding layer (src/common/forward.def): wire layouts, the client and
# server halves. Also committed; `make regen-forward` rewrites them.
.PHONY: regen-forward check-forward
regen-forward:
	python3 tools/gen-forward.py --cuda-home $(CUDA_HOME) --cc $(CC)

check-forward:
	python3 tools/gen-forward.py --cuda-home $(CUDA_HOME) --cc $(CC) --check
