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

// NIBARGS(XARG) loads the arguments shared by the nibble kernels
// (XARG: the activation or destination pointer at 16(FP)) and the mask
// and lookup table.
#define NIBARGS(XARG) \
	MOVQ q+0(FP), SI; \
	MOVQ stride+8(FP), R9; \
	MOVQ XARG, DI; \
	MOVQ nblk+24(FP), BX; \
	MOVQ half+32(FP), R10; \
	MOVQ lut+40(FP), AX; \
	MOVQ sLo+48(FP), R11; \
	MOVQ sHi+56(FP), R12; \
	MOVQ mLo+64(FP), R13; \
	MOVQ mHi+72(FP), R14; \
	VMOVDQU nibmask<>(SB), X15; \
	VMOVDQU (AX), X14

// NIBSPLIT reads 16 bytes at AX into the looked-up values of their low
// nibbles (X4) and high nibbles (X5), as int8.
#define NIBSPLIT \
	VMOVDQU (AX), X4; \
	VPSRLW $4, X4, X5; \
	VPAND X15, X4, X4; \
	VPAND X15, X5, X5; \
	VPSHUFB X4, X14, X4; \
	VPSHUFB X5, X14, X5

// NIB8(X, xoff, ACC, SUM): the 8 int8 in the low half of X, widened to
// float32, times x[xoff/4 ..] into ACC; the x values into SUM.
#define NIB8(X, XMEM, ACC, SUM) \
	VPMOVSXBD X, Y6; \
	VCVTDQ2PS Y6, Y6; \
	VMOVUPS XMEM, Y8; \
	VFMADD231PS Y8, Y6, ACC; \
	VADDPS Y8, SUM, SUM

// func nibbleRowAVX2(q *byte, stride int, x *float32, nblk, half int, lut *[16]int8, sLo, sHi, mLo, mHi *float32, group, gap int) float32
//
// For each block b (nibbles at q + b·stride, plus gap bytes after every
// group blocks; half bytes, half a multiple of 16; activations
// x[b·2·half ..]): lo = Σ_j lut[q_j & 15]·x_j,
// hi = Σ_j lut[q_j >> 4]·x_{half+j}, and the sums of those x; the result
// is Σ_b sLo[b]·lo + sHi[b]·hi − mLo[b]·Σx_lo − mHi[b]·Σx_hi.
TEXT ·nibbleRowAVX2(SB), NOSPLIT, $0-100
	NIBARGS(x+16(FP))
	VXORPS Y13, Y13, Y13 // total
	XORQ DX, DX // block index
	MOVQ group+80(FP), R15 // blocks left in this group
blockloop:
	CMPQ DX, BX
	JGE done
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ SI, AX
	LEAQ (DI)(R10*4), R8 // x of the high half
	MOVQ R10, CX
chunk:
	NIBSPLIT
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
	DECQ R15
	JNZ blockloop
	ADDQ gap+88(FP), SI
	MOVQ group+80(FP), R15
	JMP blockloop
done:
	HSUM13
	VMOVSS X0, ret+96(FP)
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

DATA q6consts<>+0(SB)/8, $0x0303030303030303
DATA q6consts<>+8(SB)/8, $0x0303030303030303
DATA q6consts<>+16(SB)/8, $0x2020202020202020
DATA q6consts<>+24(SB)/8, $0x2020202020202020
GLOBL q6consts<>(SB), RODATA|NOPTR, $32

// DOT16(V, XA, XB, S): the 16 int8 of V times x at XA(R10) and XB(R10),
// summed, times the scale at S(R12), into Y13.
#define DOT16(V, XA, XB, S) \
	VPMOVSXBD V, Y6; \
	VCVTDQ2PS Y6, Y6; \
	VMULPS XA(R10), Y6, Y0; \
	VPSRLDQ $8, V, X7; \
	VPMOVSXBD X7, Y7; \
	VCVTDQ2PS Y7, Y7; \
	VFMADD231PS XB(R10), Y7, Y0; \
	VBROADCASTSS S(R12), Y9; \
	VFMADD231PS Y9, Y0, Y13

// Q6HI puts the two bits in X5 (low bits of each byte, not yet masked)
// above the nibbles in X4 and subtracts 32.
#define Q6HI \
	VPAND X12, X5, X5; \
	VPSLLW $4, X5, X5; \
	VPOR X5, X4, X4; \
	VPSUBB X11, X4, X4

// Q6CHUNK: 16 positions l of a Q6_K half (ql at R8, qh at R9): the four
// values (ql[l]&15, ql[l+32]&15, ql[l]>>4, ql[l+32]>>4, each with two bits
// of qh[l] above) minus 32, each against its 16 activations and scale.
#define Q6CHUNK(AO, BO, HO, X0A, X0B, S0, X1A, X1B, S1, X2A, X2B, S2, X3A, X3B, S3) \
	VMOVDQU AO(R8), X1; \
	VMOVDQU BO(R8), X2; \
	VMOVDQU HO(R9), X3; \
	VPAND X15, X1, X4; \
	VMOVDQU X3, X5; \
	Q6HI; \
	DOT16(X4, X0A, X0B, S0); \
	VPAND X15, X2, X4; \
	VPSRLW $2, X3, X5; \
	Q6HI; \
	DOT16(X4, X1A, X1B, S1); \
	VPSRLW $4, X1, X4; \
	VPAND X15, X4, X4; \
	VPSRLW $4, X3, X5; \
	Q6HI; \
	DOT16(X4, X2A, X2B, S2); \
	VPSRLW $4, X2, X4; \
	VPAND X15, X4, X4; \
	VPSRLW $6, X3, X5; \
	Q6HI; \
	DOT16(X4, X3A, X3B, S3)

// func q6kRowAVX2(q *byte, x *float32, nblk int, s *float32) float32
//
// A Q6_K row (nblk blocks of 210 bytes: ql[128], qh[64], scales[16], d)
// against x: Σ_g s[g]·Σ_{16 elements of group g} (q − 32)·x, s[g] =
// d·scales[g] decoded by the caller (16 per block).
TEXT ·q6kRowAVX2(SB), NOSPLIT, $0-36
	MOVQ q+0(FP), SI
	MOVQ x+8(FP), R10
	MOVQ nblk+16(FP), BX
	MOVQ s+24(FP), R12
	VMOVDQU nibmask<>(SB), X15
	VMOVDQU q6consts<>(SB), X12
	VMOVDQU q6consts<>+16(SB), X11
	VXORPS Y13, Y13, Y13
q6block:
	TESTQ BX, BX
	JZ q6done
	MOVQ SI, R8
	LEAQ 128(SI), R9
	MOVQ $2, CX
q6half:
	Q6CHUNK(0, 32, 0, 0, 32, 0, 128, 160, 8, 256, 288, 16, 384, 416, 24)
	Q6CHUNK(16, 48, 16, 64, 96, 4, 192, 224, 12, 320, 352, 20, 448, 480, 28)
	ADDQ $64, R8
	ADDQ $32, R9
	ADDQ $512, R10
	ADDQ $32, R12
	DECQ CX
	JNZ q6half
	ADDQ $210, SI
	DECQ BX
	JMP q6block
q6done:
	HSUM13
	VMOVSS X0, ret+32(FP)
	VZEROUPPER
	RET

// DEQ8(X, OUT): the 8 int8 in the low half of X as float32, times Y10,
// minus Y12, stored at OUT (multiply then subtract, as ggml rounds).
#define DEQ8(X, OUT, S, M) \
	VPMOVSXBD X, Y6; \
	VCVTDQ2PS Y6, Y6; \
	VMULPS S, Y6, Y6; \
	VSUBPS M, Y6, Y6; \
	VMOVUPS Y6, OUT

// func nibbleDequantAVX2(q *byte, stride int, dst *float32, nblk, half int, lut *[16]int8, sLo, sHi, mLo, mHi *float32, group, gap int)
//
// The values nibbleRowAVX2 multiplies, written out: per block b,
// dst[j] = lut[q_j & 15]·sLo[b] − mLo[b] and dst[half+j] =
// lut[q_j >> 4]·sHi[b] − mHi[b] for j < half.
TEXT ·nibbleDequantAVX2(SB), NOSPLIT, $0-96
	NIBARGS(dst+16(FP))
	XORQ DX, DX
	MOVQ group+80(FP), R15
dqblock:
	CMPQ DX, BX
	JGE dqdone
	VBROADCASTSS (R11)(DX*4), Y10
	VBROADCASTSS (R12)(DX*4), Y11
	VBROADCASTSS (R13)(DX*4), Y12
	VBROADCASTSS (R14)(DX*4), Y13
	MOVQ SI, AX
	LEAQ (DI)(R10*4), R8
	MOVQ R10, CX
dqchunk:
	NIBSPLIT
	DEQ8(X4, (DI), Y10, Y12)
	VPSRLDQ $8, X4, X7
	DEQ8(X7, 32(DI), Y10, Y12)
	DEQ8(X5, (R8), Y11, Y13)
	VPSRLDQ $8, X5, X7
	DEQ8(X7, 32(R8), Y11, Y13)
	ADDQ $16, AX
	ADDQ $64, DI
	ADDQ $64, R8
	SUBQ $16, CX
	JNZ dqchunk
	MOVQ R8, DI
	ADDQ R9, SI
	INCQ DX
	DECQ R15
	JNZ dqblock
	ADDQ gap+88(FP), SI
	MOVQ group+80(FP), R15
	JMP dqblock
dqdone:
	VZEROUPPER
	RET
