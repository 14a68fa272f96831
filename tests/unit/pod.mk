# SPDX-License-Identifier: MIT
# test_pod: a client's Kubernetes pod and container, read from its cgroup paths.
$(BUILD)/tests/unit/test_pod: $(BUILD)/obj/tests/unit/test_pod.o $(BUILD)/obj/src/server/pod.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

TEST_BINS += $(BUILD)/tests/unit/test_pod
