// SPDX-License-Identifier: MIT
//
// Forwarders to the real driver's own functions (exports/driver.c). Each
// loads the function mps__drv_slots[i] holds and jumps to it, with every
// argument register, the vector registers, the stack and the return address
// as the caller left them: the driver's function runs as if the library had
// called it directly, whatever its arguments (some take more than six, on
// the stack) and whatever it returns. A table holding a forwarder is handed
// out only once its mps__drv_slots entry is set.
//
// %r11 is scratch at a call under the x86-64 System V convention and
// carries no argument. x86-64 only.

#include "client/exports/driver.h"

	.text

.macro FORWARD name, index
	.globl \name
	.hidden \name
	.type \name, @function
	.p2align 4
\name:
	movq mps__drv_slots+8*\index(%rip), %r11
	jmp *%r11
	.size \name, .-\name
.endm

	FORWARD mps__drv_fwd_69a28e9f_19, MPS_DRV_69A28E9F_19
	FORWARD mps__drv_fwd_69a28e9f_21, MPS_DRV_69A28E9F_21
	FORWARD mps__drv_fwd_69a28e9f_24, MPS_DRV_69A28E9F_24
	FORWARD mps__drv_fwd_69a28e9f_25, MPS_DRV_69A28E9F_25
	FORWARD mps__drv_fwd_da9151d3_1, MPS_DRV_DA9151D3_1
	FORWARD mps__drv_fwd_da9151d3_2, MPS_DRV_DA9151D3_2
	FORWARD mps__drv_fwd_da9151d3_3, MPS_DRV_DA9151D3_3
	FORWARD mps__drv_fwd_da9151d3_4, MPS_DRV_DA9151D3_4
	FORWARD mps__drv_fwd_da9151d3_6, MPS_DRV_DA9151D3_6

	.section .note.GNU-stack, "", @progbits
