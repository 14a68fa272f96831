# SPDX-License-Identifier: MIT
# test_image: the extent of module images (src/common/image.c), on a cubin
# and a fatbin nvcc builds from the test kernels, placed next to the test.
IMAGE_TEST_IMAGES := $(BUILD)/tests/unit/kernels.cubin $(BUILD)/tests/unit/kernels.fatbin

$(BUILD)/tests/unit/kernels.cubin: tests/kernels/kernels.cu tests/kernels/long_name.h
	@mkdir -p $(dir $@)
	$(NVCC) -cubin -arch=sm_90 -o $@ $<

$(BUILD)/tests/unit/kernels.fatbin: tests/kernels/kernels.cu tests/kernels/long_name.h
	@mkdir -p $(dir $@)
	$(NVCC) -fatbin -gencode arch=compute_90,code=[sm_90,compute_90] -o $@ $<

$(BUILD)/tests/unit/test_image: $(BUILD)/obj/tests/unit/test_image.o $(BUILD)/obj/src/common/image.o \
		| $(IMAGE_TEST_IMAGES) $(KERNELS_PTX)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

TEST_BINS += $(BUILD)/tests/unit/test_image
