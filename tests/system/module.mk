# SPDX-License-Identifier: MIT
# tests/system: whole-system tests. The s_* programs run as clients of a
# fresh daemon like the driver-API tests (several processes, a client killed
# mid-stream, a hostile client); the scripts set up their own daemons.

SYSTEM_NAMES := s_clients s_kill s_malformed s_burst s_passthrough s_fair s_ipc s_poolshare s_fault s_soak s_place
SYSTEM_BINS  := $(addprefix $(BUILD)/tests/system/,$(SYSTEM_NAMES))

$(SYSTEM_BINS): $(BUILD)/tests/system/%: $(BUILD)/obj/tests/system/%.o $(BUILD)/obj/tests/cuda/common.o $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -L$(CUDA_HOME)/lib64/stubs -lcuda -lm $(LDLIBS)

TESTS_CUDA   += $(filter-out %/s_passthrough,$(SYSTEM_BINS))
TEST_DEPS_EXTRA += $(BUILD)/tests/system/s_passthrough
# Alone (tests/module.mk): s_fair and sched (one client's flood against
# another's round trips), s_soak (loads every CPU for a while), replies and
# replies_server (run t_event).
TESTS_SERIAL += s_fair s_soak sched replies replies_server
TEST_SCRIPTS += tests/system/passthrough.sh tests/system/peercred.sh tests/system/sched.sh \
                tests/system/replies.sh tests/system/replies_server.sh tests/system/placement.sh tests/system/placed.sh \
                tests/system/migrate.sh tests/system/migrate_memory.sh \
                tests/system/staged_sync.sh tests/system/naps.sh

# The control daemon's tests (openmps-control): scripts that start their own
# daemons, with two helper programs: c_client, a CUDA client driven step by
# step from the shell, and c_fuzz, hostile peers of the daemon's socket.
CONTROL_HELPERS := $(BUILD)/tests/system/c_client $(BUILD)/tests/system/c_fuzz $(BUILD)/tests/system/c_nvml

$(BUILD)/tests/system/c_nvml: $(BUILD)/obj/tests/system/c_nvml.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -ldl

$(BUILD)/tests/system/c_client: $(BUILD)/obj/tests/system/c_client.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -L$(CUDA_HOME)/lib64/stubs -lcuda $(LDLIBS)

$(BUILD)/tests/system/c_fuzz: $(BUILD)/obj/tests/system/c_fuzz.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

TEST_DEPS_EXTRA += $(CONTROL_HELPERS)
TEST_SCRIPTS += tests/system/control_cli.sh tests/system/control_commands.sh \
                tests/system/control_clients.sh tests/system/control_users.sh \
                tests/system/control_exclusive.sh tests/system/control_multiuser.sh \
                tests/system/control_quit.sh tests/system/control_logs.sh \
                tests/system/control_robust.sh tests/system/control_mps_script.sh \
                tests/system/control_hostmem.sh tests/system/trace.sh \
                tests/system/control_visible.sh tests/system/control_signals.sh \
                tests/system/control_limits.sh tests/system/control_metrics.sh tests/system/install.sh \
                tests/system/control_sms.sh tests/system/control_partitions.sh tests/system/control_vdevices.sh \
                tests/system/queries.sh tests/system/replay.sh tests/system/control_namespaces.sh \
                tests/system/control_dropin.sh tests/system/control_cdi.sh tests/system/control_pods.sh \
                tests/system/control_pidns.sh tests/system/deviceplugin.sh tests/system/nvml.sh \
                tests/system/control_replies.sh tests/system/smi.sh tests/system/podman_cdi.sh
# Alone: the time quit and signals take, the CPU and GPU time in the metrics,
# how much the server replays (a client kept from its CPU has runs cut short).
TESTS_SERIAL += control_quit control_signals control_metrics replay
