// SPDX-License-Identifier: MIT
/*
 * The only way openmps touches memory shared with another process or thread
 * without a lock. Thin names over C11 <stdatomic.h> explicit-order operations,
 * so that every load and store of shared state says which ordering it needs.
 * Pair mps_store_release() on the writer with mps_load_acquire() on the reader:
 * everything written before the release is visible after the acquire. Use
 * mps_fence() where a store must be ordered before a later load (the sleep /
 * wakeup handshakes), which release/acquire alone does not give.
 */
#ifndef MPS_COMMON_ATOMICS_H
#define MPS_COMMON_ATOMICS_H

#include <stdatomic.h>
#include <stdint.h>

#define mps_load_relaxed(p)     atomic_load_explicit((_Atomic __typeof__(*(p)) *)(p), memory_order_relaxed)
#define mps_load_acquire(p)     atomic_load_explicit((_Atomic __typeof__(*(p)) *)(p), memory_order_acquire)
#define mps_store_relaxed(p, v) atomic_store_explicit((_Atomic __typeof__(*(p)) *)(p), (v), memory_order_relaxed)
#define mps_store_release(p, v) atomic_store_explicit((_Atomic __typeof__(*(p)) *)(p), (v), memory_order_release)
#define mps_xchg(p, v)          atomic_exchange_explicit((_Atomic __typeof__(*(p)) *)(p), (v), memory_order_acq_rel)
#define mps_cas(p, expp, v)     atomic_compare_exchange_strong_explicit((_Atomic __typeof__(*(p)) *)(p), (expp), (v), \
					memory_order_acq_rel, memory_order_acquire)
#define mps_fetch_add(p, v)     atomic_fetch_add_explicit((_Atomic __typeof__(*(p)) *)(p), (v), memory_order_acq_rel)
#define mps_fetch_or(p, v)      atomic_fetch_or_explicit((_Atomic __typeof__(*(p)) *)(p), (v), memory_order_acq_rel)
#define mps_fetch_sub(p, v)     atomic_fetch_sub_explicit((_Atomic __typeof__(*(p)) *)(p), (v), memory_order_acq_rel)
#define mps_fetch_and(p, v)     atomic_fetch_and_explicit((_Atomic __typeof__(*(p)) *)(p), (v), memory_order_acq_rel)

/* Full barrier: orders earlier stores before later loads (store-load). */
static inline void mps_fence(void)
{
	atomic_thread_fence(memory_order_seq_cst);
}

/* Tells the CPU we are spinning (saves power, yields the core to a sibling). */
static inline void mps_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	atomic_signal_fence(memory_order_seq_cst);
#endif
}

#endif
