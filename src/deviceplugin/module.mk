# SPDX-License-Identifier: MIT
# src/deviceplugin: openmps-device-plugin, the kubelet's device plugin (C++,
# gRPC and protobuf from the system: Debian's libgrpc++-dev,
# protobuf-compiler-grpc). Built only where those are installed; the test
# (tests/system/deviceplugin.sh, with tests/deviceplugin/fake_kubelet)
# says so and skips where they are not. Never sanitized: the libraries are
# not, and the plugin shares no code with the rest.
CXX        ?= g++
DP_PKGS    := grpc++ protobuf
DP_PLUGIN  := $(shell command -v grpc_cpp_plugin 2>/dev/null)
DP_OK      := $(shell pkg-config --exists $(DP_PKGS) 2>/dev/null && command -v protoc >/dev/null && \
                 test -n "$(DP_PLUGIN)" && echo yes)
DP_GEN     := $(BUILD)/gen/deviceplugin
DP_BIN     := $(BUILD)/bin/openmps-device-plugin
DP_KUBELET := $(BUILD)/tests/deviceplugin/fake_kubelet

ifeq ($(DP_OK),yes)
DP_CXXFLAGS := -O2 -g -std=c++17 -Wall -Wextra -Wno-unused-parameter $(if $(WERROR),-Werror) \
               -Isrc -I$(DP_GEN) $(shell pkg-config --cflags $(DP_PKGS))
DP_LIBS     := $(shell pkg-config --libs $(DP_PKGS)) -lpthread
DP_GEN_SRCS := $(DP_GEN)/api.pb.cc $(DP_GEN)/api.grpc.pb.cc
DP_GEN_OBJS := $(DP_GEN_SRCS:%.cc=%.o)
DP_OBJS     := $(patsubst src/deviceplugin/%.cc,$(BUILD)/obj/deviceplugin/%.o,$(wildcard src/deviceplugin/*.cc))

$(DP_GEN)/api.pb.cc $(DP_GEN)/api.pb.h $(DP_GEN)/api.grpc.pb.cc $(DP_GEN)/api.grpc.pb.h &: src/deviceplugin/api.proto
	@mkdir -p $(DP_GEN)
	protoc -Isrc/deviceplugin --cpp_out=$(DP_GEN) --grpc_out=$(DP_GEN) --plugin=protoc-gen-grpc=$(DP_PLUGIN) $<

# The generated code is not ours to warn about.
$(DP_GEN)/%.o: $(DP_GEN)/%.cc
	$(CXX) -O2 -g -std=c++17 -w -I$(DP_GEN) $(shell pkg-config --cflags $(DP_PKGS)) -c -o $@ $<

$(BUILD)/obj/deviceplugin/%.o: src/deviceplugin/%.cc $(DP_GEN)/api.grpc.pb.h
	@mkdir -p $(dir $@)
	$(CXX) $(DP_CXXFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/obj/tests/deviceplugin/%.o: tests/deviceplugin/%.cc $(DP_GEN)/api.grpc.pb.h
	@mkdir -p $(dir $@)
	$(CXX) $(DP_CXXFLAGS) -MMD -MP -c -o $@ $<

$(DP_BIN): $(DP_OBJS) $(DP_GEN_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) -o $@ $^ $(DP_LIBS)

$(DP_KUBELET): $(BUILD)/obj/tests/deviceplugin/fake_kubelet.o $(DP_GEN_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) -o $@ $^ $(DP_LIBS)

ALL_TARGETS += $(DP_BIN)
TEST_DEPS_EXTRA += $(DP_KUBELET)
-include $(DP_OBJS:.o=.d) $(BUILD)/obj/tests/deviceplugin/fake_kubelet.d
endif
