// SPDX-License-Identifier: MIT
/*
 * LONG_KERNEL_NAME and LONG_GLOBAL_NAME: identifiers of a little over 1 KiB,
 * longer than any fixed name buffer would hold — as the mangled names of C++
 * template kernels are (PyTorch's reductions run to kilobytes). Shared by
 * kernels.cu, which defines the kernel and the global under these names, and
 * the stand-in's twins, which must find them by the same names.
 */
#ifndef TESTS_KERNELS_LONG_NAME_H
#define TESTS_KERNELS_LONG_NAME_H

#define LN_CAT_(a, b) a##b
#define LN_CAT(a, b) LN_CAT_(a, b)
#define LN_1(x) LN_CAT(x, _abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_)
#define LN_4(x) LN_1(LN_1(LN_1(LN_1(x))))
#define LN_16(x) LN_4(LN_4(LN_4(LN_4(x))))

#define LONG_KERNEL_NAME LN_16(iota_u32_named_at_length)
#define LONG_GLOBAL_NAME LN_16(g_word_named_at_length)

#define LN_STR_(x) #x
#define LN_STR(x) LN_STR_(x)

#endif
