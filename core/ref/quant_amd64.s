//go:build amd64 && !purego

#include "textflag.h"

// Row dot products of ggml block formats with float32 activations (AVX2 +
// FMA). The Go wrappers (quant_amd64.go) decode the per-block scales into
// float32 arrays; these loops only expand the packed values.

DATA nibmask<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibmask<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nibmask<>(SB), RODATA|NOPTR, $16

// HSUM13 sums the eight lanes of Y13 into the low lane of X0.
#define HSUM13 \
	VEXTRACTF128 $1, Y13, X1; \
	VADDPS X1, X13, X0; \
	VMOVHLPS X0, X0, X1; \
	VADDPS X1, X0, X0; \
	VMOVSHDUP X0, X1; \
	VADDSS X1, X0, X0

// NIB8(X, xoff, ACC, SUM): the 8 int8 in the low half of X, widened to
// float32, times x[xoff/4 ..] into ACC; the x values into SUM.
#define NIB8(X, XMEM, ACC, SUM) \
	VPMOVSXBD X, Y6; \
	VCVTDQ2PS Y6, Y6; \
	VMOVUPS XMEM, Y8; \
	VFMADD231PS Y8, Y6, ACC; \
	VADDPS Y8, SUM, SUM

// func nibbleRowAVX2(q *byte, stride int, x *float32, nblk, half int, lut *[16]int8, sLo, sHi, mLo, mHi *float32) float32
//
// For each block b (nibbles at q + b·stride, half bytes, half a multiple
// of 16; activations x[b·2·half ..]): lo = Σ_j lut[q_j & 15]·x_j,
// hi = Σ_j lut[q_j >> 4]·x_{half+j}, and the sums of those x; the result
// is Σ_b sLo[b]·lo + sHi[b]·hi − mLo[b]·Σx_lo − mHi[b]·Σx_hi.
TEXT ·nibbleRowAVX2(SB), NOSPLIT, $0-84
	MOVQ q+0(FP), SI
	MOVQ stride+8(FP), R9
	MOVQ x+16(FP), DI
	MOVQ nblk+24(FP), BX
	MOVQ half+32(FP), R10
	MOVQ lut+40(FP), AX
	MOVQ sLo+48(FP), R11
	MOVQ sHi+56(FP), R12
	MOVQ mLo+64(FP), R13
	MOVQ mHi+72(FP), R14
	VMOVDQU nibmask<>(SB), X15
	VMOVDQU (AX), X14
	VXORPS Y13, Y13, Y13 // total
	XORQ DX, DX // block index
	MOVQ R10, R15
	SHLQ $2, R15 // bytes of x in one half
blockloop:
	CMPQ DX, BX
	JGE done
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ SI, AX
	MOVQ DI, R8
	ADDQ R15, R8 // x of the high half
	MOVQ R10, CX
chunk:
	VMOVDQU (AX), X4
	VPSRLW $4, X4, X5
	VPAND X15, X4, X4
	VPAND X15, X5, X5
	VPSHUFB X4, X14, X4
	VPSHUFB X5, X14, X5
	NIB8(X4, (DI), Y0, Y2)
	VPSRLDQ $8, X4, X7
	NIB8(X7, 32(DI), Y0, Y2)
	NIB8(X5, (R8), Y1, Y3)
	VPSRLDQ $8, X5, X7
	NIB8(X7, 32(R8), Y1, Y3)
	ADDQ $16, AX
	ADDQ $64, DI
	ADDQ $64, R8
	SUBQ $16, CX
	JNZ chunk
	VBROADCASTSS (R11)(DX*4), Y9
	VFMADD231PS Y9, Y0, Y13
	VBROADCASTSS (R12)(DX*4), Y9
	VFMADD231PS Y9, Y1, Y13
	VBROADCASTSS (R13)(DX*4), Y9
	VFNMADD231PS Y9, Y2, Y13
	VBROADCASTSS (R14)(DX*4), Y9
	VFNMADD231PS Y9, Y3, Y13
	MOVQ R8, DI // next block's x follows the high half
	ADDQ R9, SI
	INCQ DX
	JMP blockloop
done:
	HSUM13
	VMOVSS X0, ret+80(FP)
	VZEROUPPER
	RET

// func int8RowAVX2(q *byte, stride int, x *float32, nblk int, s *float32) float32
//
// Σ_b s[b]·Σ_{j<32} int8(q[b·stride + j])·x[32b + j].
TEXT ·int8RowAVX2(SB), NOSPLIT, $0-44
	MOVQ q+0(FP), SI
	MOVQ stride+8(FP), R9
	MOVQ x+16(FP), DI
	MOVQ nblk+24(FP), BX
	MOVQ s+32(FP), R11
	VXORPS Y13, Y13, Y13
	XORQ DX, DX
i8loop:
	CMPQ DX, BX
	JGE i8done
	VPMOVSXBD (SI), Y4
	VPMOVSXBD 8(SI), Y5
	VPMOVSXBD 16(SI), Y6
	VPMOVSXBD 24(SI), Y7
	VCVTDQ2PS Y4, Y4
	VCVTDQ2PS Y5, Y5
	VCVTDQ2PS Y6, Y6
	VCVTDQ2PS Y7, Y7
	VMULPS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y0
	VMULPS 64(DI), Y6, Y1
	VFMADD231PS 96(DI), Y7, Y1
	VADDPS Y1, Y0, Y0
	VBROADCASTSS (R11)(DX*4), Y9
	VFMADD231PS Y9, Y0, Y13
	ADDQ R9, SI
	ADDQ $128, DI
	INCQ DX
	JMP i8loop
i8done:
	HSUM13
	VMOVSS X0, ret+40(FP)
	VZEROUPPER
	RET
