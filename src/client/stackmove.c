// SPDX-License-Identifier: MIT
/*
 * Moving pages of the calling thread's own stack in place, for
 * cuMemHostRegister of a stack variable (NPP registers four bytes of its
 * caller's stack). Registration puts a range's pages in shared memory
 * mapped over the same addresses (hostreg.c): their contents are copied
 * into a memfd, which is then mapped over them. On the calling thread's
 * stack the functions running there, this one among them, write those
 * pages between the copy and the mapping, and the mapping would put back
 * what they held when the copy began. So here the copy and the mapping
 * are two system calls in one block of assembly, with nothing written to
 * memory between them (a system call writes nothing to the user stack; a
 * signal handled between them writes below the stack pointer, where
 * nothing lives once it returns). Unregistering moves the pages back into
 * private memory the same way (a copy into anonymous pages, then mremap
 * over the range), so that a child the program forks gets a copy of its
 * stack rather than sharing it. Below the pages, the main thread's stack
 * must still be able to grow: it is grown first, by touching the pages
 * under the caller's frame.
 *
 * x86-64 only; elsewhere a stack range is refused (CUDA_ERROR_NOT_SUPPORTED).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "client/client.h"

#define GROW_BYTES (256u << 10)   /* stack touched below the caller before a move */

/* Touches GROW_BYTES below the caller's frame, so that the main thread's
 * growable stack reaches below the pages about to be moved. */
static __attribute__((noinline)) void grow_below(void)
{
	volatile char pages[GROW_BYTES];

	for (size_t at = 0; at < sizeof(pages); at += 4096)
		pages[at] = 0;
	__asm__ volatile("" : : "r"(pages) : "memory");
}

#if defined(__x86_64__)

int mps__stack_move(int fd, void *start, size_t len)
{
	long rdi = fd, rsi = (long)(uintptr_t)start, rdx = (long)len, ret;

	grow_below();
	/* The register variables are set after the last call: a call may
	 * change them before the block reads them. */
	register long r10 __asm__("r10") = 0;
	register long r8 __asm__("r8") = fd;
	register long r9 __asm__("r9") = 0;

	/* pwrite64(fd, start, len, 0); if all was written,
	 * mmap(start, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0). */
	__asm__ volatile("syscall\n\t"
			 "cmpq %%rdx, %%rax\n\t"
			 "jne 1f\n\t"
			 "movq %%rsi, %%rdi\n\t"
			 "movq %%rdx, %%rsi\n\t"
			 "movl %[prot], %%edx\n\t"
			 "movl %[flags], %%r10d\n\t"
			 "movl %[nr_mmap], %%eax\n\t"
			 "syscall\n\t"
			 "1:\n\t"
			 : "=a"(ret), "+D"(rdi), "+S"(rsi), "+d"(rdx), "+r"(r10), "+r"(r8), "+r"(r9)
			 : "0"((long)SYS_pwrite64), [prot] "i"(PROT_READ | PROT_WRITE), [flags] "i"(MAP_SHARED | MAP_FIXED),
			   [nr_mmap] "i"(SYS_mmap)
			 : "rcx", "r11", "memory");
	if (ret == (long)(uintptr_t)start)
		return 0;
	return ret < 0 ? (int)ret : -EIO;   /* a short copy: nothing was mapped */
}

int mps__stack_restore(void *start, size_t len)
{
	void *tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	long rsi = (long)(uintptr_t)start, rdi = (long)(uintptr_t)tmp, rcx = (long)len, rdx = (long)len, ret;

	if (tmp == MAP_FAILED)
		return -errno;
	register long r10 __asm__("r10") = MREMAP_MAYMOVE | MREMAP_FIXED;
	register long r8 __asm__("r8") = (long)(uintptr_t)start;
	register long r9 __asm__("r9") = (long)(uintptr_t)tmp;

	/* memcpy(tmp, start, len); mremap(tmp, len, len, MAYMOVE | FIXED, start). */
	__asm__ volatile("rep movsb\n\t"
			 "movq %%r9, %%rdi\n\t"
			 "movq %%rdx, %%rsi\n\t"
			 "movl %[nr_mremap], %%eax\n\t"
			 "syscall\n\t"
			 : "=a"(ret), "+D"(rdi), "+S"(rsi), "+c"(rcx), "+d"(rdx), "+r"(r10), "+r"(r8), "+r"(r9)
			 : [nr_mremap] "i"(SYS_mremap)
			 : "r11", "memory");
	if (ret == (long)(uintptr_t)start)
		return 0;
	munmap(tmp, len);
	return ret < 0 ? (int)ret : -EIO;
}

#else

int mps__stack_move(int fd, void *start, size_t len)
{
	(void)fd;
	(void)start;
	(void)len;
	(void)grow_below;
	return -ENOTSUP;
}

int mps__stack_restore(void *start, size_t len)
{
	(void)start;
	(void)len;
	return -ENOTSUP;
}

#endif
