# SPDX-License-Identifier: MIT
# tests: unit tests (tests/unit), driver-API programs (tests/cuda), system
# tests (tests/system), programs on the CUDA runtime (tests/cudart), each
# folder adding its own rules. `make test` builds everything and runs it all
# through tests/run-tests.sh:
#   - TEST_BINS: standalone programs, run as they are;
#   - TESTS_CUDA: driver-API programs, each run as a client of its own openmps
#     daemon on the software stand-in (tests/system/with-openmps.sh);
#   - TEST_SCRIPTS: system tests, given the build folder.
# The runner runs TEST_JOBS tests at once; a test whose name (its program or
# script, without folder or .sh) a module adds to TESTS_SERIAL runs alone:
# one that measures time, CPU use or fairness, or loads the whole machine.
include $(wildcard tests/unit/*.mk) $(wildcard tests/cuda/module.mk) $(wildcard tests/system/module.mk) \
        $(wildcard tests/cudart/module.mk)
include tests/fuzz/module.mk

# The generated forwarding layer matches its generator (make check-forward);
# the mechanical house rules hold (docs/HACKING.md).
TEST_SCRIPTS += tests/check_forward.sh tests/check_rules.sh

TEST_DEPS := $(ALL_TARGETS) $(TEST_BINS) $(TESTS_CUDA) $(TEST_DEPS_EXTRA) $(KERNELS_PTX) $(PRINTF_PTX) $(STANDIN_LIB) \
             $(STANDIN_TEST)

.PHONY: test check-build
check-build: $(TEST_DEPS)

# The build under it runs on every CPU unless -j was given. A sanitizer
# slows every test many times over: there each gets twice the runner's
# limit (240 s; a hang still ends), unless TEST_TIMEOUT says otherwise.
test:
	@$(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc)) check-build
	@TEST_TIMEOUT="$${TEST_TIMEOUT:-$(if $(SANITIZE),240,120)}" TEST_SERIAL="$(sort $(TESTS_SERIAL))" tests/run-tests.sh $(TEST_BINS) $(STANDIN_TEST) \
		$(foreach t,$(TESTS_CUDA),"tests/system/with-openmps.sh $(BUILD) $(t)") \
		$(foreach t,$(TEST_SCRIPTS),"$(t) $(BUILD)")
