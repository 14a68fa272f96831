// SPDX-License-Identifier: MIT
//
// The three targets an exported stub (gen/stubs.S) can jump to besides a
// real function. Every stub enters with its symbol index in %eax and the
// caller's arguments untouched in registers and on the stack.
//
// mps__resolve_entry: the first call of any driver function. Saves every
// argument register, asks mps__resolve(index) to decide the mode (once per
// process) and for the function that now serves this symbol, restores the
// registers and jumps there, as if the program had called it directly.
//
// mps__unsupported_entry / mps__failed_entry: functions we do not serve in
// server mode, and every function once a daemon has refused us. They never
// forward the arguments, so they only need the index.
//
// mps__trace_entry: every served function when OPENMPS_TRACE_ERRORS or
// OPENMPS_CALL_STATS is set. Tells mps__trace_enter(index) first, then calls
// mps__impl[index] with the caller's arguments — the six argument registers
// and the vector registers as they came, and the first 16 stack slots copied
// (no driver function takes more than 6 + 16 arguments) — and returns what
// mps__trace_leave(index, what enter returned, result) returns: the result.
//
// x86-64 System V only.

	.text

// The argument registers of the System V convention, saved on the stack and
// put back: the six integer ones (48 bytes), and the eight vector ones
// (128 bytes), which keep %rsp's alignment mod 16.
	.macro save_int_args
	push %rdi
	push %rsi
	push %rdx
	push %rcx
	push %r8
	push %r9
	.endm

	.macro restore_int_args
	pop %r9
	pop %r8
	pop %rcx
	pop %rdx
	pop %rsi
	pop %rdi
	.endm

	.macro save_vec_args
	sub $128, %rsp
	movdqu %xmm0, 0(%rsp)
	movdqu %xmm1, 16(%rsp)
	movdqu %xmm2, 32(%rsp)
	movdqu %xmm3, 48(%rsp)
	movdqu %xmm4, 64(%rsp)
	movdqu %xmm5, 80(%rsp)
	movdqu %xmm6, 96(%rsp)
	movdqu %xmm7, 112(%rsp)
	.endm

	.macro restore_vec_args
	movdqu 0(%rsp), %xmm0
	movdqu 16(%rsp), %xmm1
	movdqu 32(%rsp), %xmm2
	movdqu 48(%rsp), %xmm3
	movdqu 64(%rsp), %xmm4
	movdqu 80(%rsp), %xmm5
	movdqu 96(%rsp), %xmm6
	movdqu 112(%rsp), %xmm7
	add $128, %rsp
	.endm

	.globl mps__resolve_entry
	.hidden mps__resolve_entry
	.type mps__resolve_entry, @function
mps__resolve_entry:
	save_int_args
	push %rax
	// 7 pushes after the return address leave %rsp 16-byte aligned.
	save_vec_args
	mov %eax, %edi
	call mps__resolve
	mov %rax, %r11
	restore_vec_args
	pop %rax
	restore_int_args
	jmp *%r11
	.size mps__resolve_entry, .-mps__resolve_entry

	.globl mps__trace_entry
	.hidden mps__trace_entry
	.hidden mps__impl
	.type mps__trace_entry, @function
mps__trace_entry:
	push %rbp
	mov %rsp, %rbp
	push %rbx
	push %r12
	mov %eax, %ebx
	// mps__trace_enter(index), the argument registers kept around it:
	// 6 pushes and 128 bytes leave %rsp 16-byte aligned.
	save_int_args
	save_vec_args
	mov %ebx, %edi
	call mps__trace_enter
	mov %eax, %r12d
	restore_vec_args
	restore_int_args
	// 16 slots; with the four pushes above %rsp stays 16-byte aligned.
	sub $128, %rsp
	xor %r10d, %r10d
1:	mov 16(%rbp,%r10,8), %r11
	mov %r11, (%rsp,%r10,8)
	inc %r10
	cmp $16, %r10
	jb 1b
	lea mps__impl(%rip), %r11
	mov (%r11,%rbx,8), %r11
	call *%r11
	mov %ebx, %edi
	mov %r12d, %esi
	mov %eax, %edx
	call mps__trace_leave
	lea -16(%rbp), %rsp
	pop %r12
	pop %rbx
	pop %rbp
	ret
	.size mps__trace_entry, .-mps__trace_entry

	.globl mps__unsupported_entry
	.hidden mps__unsupported_entry
	.type mps__unsupported_entry, @function
mps__unsupported_entry:
	mov %eax, %edi
	jmp mps__unsupported_call
	.size mps__unsupported_entry, .-mps__unsupported_entry

	.globl mps__failed_entry
	.hidden mps__failed_entry
	.type mps__failed_entry, @function
mps__failed_entry:
	mov %eax, %edi
	jmp mps__failed_call
	.size mps__failed_entry, .-mps__failed_entry

	.section .note.GNU-stack,"",@progbits
