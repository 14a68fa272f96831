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
// x86-64 System V only.

	.text

	.globl mps__resolve_entry
	.hidden mps__resolve_entry
	.type mps__resolve_entry, @function
mps__resolve_entry:
	push %rdi
	push %rsi
	push %rdx
	push %rcx
	push %r8
	push %r9
	push %rax
	// 7 pushes after the return address leave %rsp 16-byte aligned.
	sub $128, %rsp
	movdqu %xmm0, 0(%rsp)
	movdqu %xmm1, 16(%rsp)
	movdqu %xmm2, 32(%rsp)
	movdqu %xmm3, 48(%rsp)
	movdqu %xmm4, 64(%rsp)
	movdqu %xmm5, 80(%rsp)
	movdqu %xmm6, 96(%rsp)
	movdqu %xmm7, 112(%rsp)
	mov %eax, %edi
	call mps__resolve
	mov %rax, %r11
	movdqu 0(%rsp), %xmm0
	movdqu 16(%rsp), %xmm1
	movdqu 32(%rsp), %xmm2
	movdqu 48(%rsp), %xmm3
	movdqu 64(%rsp), %xmm4
	movdqu 80(%rsp), %xmm5
	movdqu 96(%rsp), %xmm6
	movdqu 112(%rsp), %xmm7
	add $128, %rsp
	pop %rax
	pop %r9
	pop %r8
	pop %rcx
	pop %rdx
	pop %rsi
	pop %rdi
	jmp *%r11
	.size mps__resolve_entry, .-mps__resolve_entry

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
