//go:build amd64 && !purego

#include "textflag.h"

// Row-block kernels of the chunked KDA; d is a multiple of 16 and rows > 0.

// func axpyRowsAVX512(dst, c, R *float32, ld, rows, d int)
// dst[k] += Σ_{r<rows} c[r]·R[r·ld + k] for k < d, the terms added in r
// order (as a sequence of Axpy calls would), 64 or 16 columns at a time.
TEXT ·axpyRowsAVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DX
	MOVQ c+8(FP), BX
	MOVQ R+16(FP), SI
	MOVQ ld+24(FP), R8
	SHLQ $2, R8
	MOVQ rows+32(FP), R9
	MOVQ d+40(FP), CX

ar64:
	CMPQ CX, $64
	JL   ar16
	VMOVUPS (DX), Z0
	VMOVUPS 64(DX), Z1
	VMOVUPS 128(DX), Z2
	VMOVUPS 192(DX), Z3
	MOVQ SI, R10
	XORQ R11, R11
ar64r:
	VBROADCASTSS (BX)(R11*4), Z4
	VFMADD231PS (R10), Z4, Z0
	VFMADD231PS 64(R10), Z4, Z1
	VFMADD231PS 128(R10), Z4, Z2
	VFMADD231PS 192(R10), Z4, Z3
	ADDQ R8, R10
	INCQ R11
	CMPQ R11, R9
	JL   ar64r
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, 192(DX)
	ADDQ $256, DX
	ADDQ $256, SI
	SUBQ $64, CX
	JMP  ar64

ar16:
	CMPQ CX, $16
	JL   ardone
	VMOVUPS (DX), Z0
	MOVQ SI, R10
	XORQ R11, R11
ar16r:
	VBROADCASTSS (BX)(R11*4), Z4
	VFMADD231PS (R10), Z4, Z0
	ADDQ R8, R10
	INCQ R11
	CMPQ R11, R9
	JL   ar16r
	VMOVUPS Z0, (DX)
	ADDQ $64, DX
	ADDQ $64, SI
	SUBQ $16, CX
	JMP  ar16

ardone:
	VZEROUPPER
	RET

// func mulRowsAVX512(dst, v *float32, rows, d int)
// dst[r·d + k] *= v[k] for r < rows, k < d.
TEXT ·mulRowsAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DX
	MOVQ v+8(FP), BX
	MOVQ rows+16(FP), R9
	MOVQ d+24(FP), R8
mrrow:
	MOVQ BX, SI
	MOVQ R8, CX
mrcol:
	VMOVUPS (DX), Z0
	VMULPS (SI), Z0, Z0
	VMOVUPS Z0, (DX)
	ADDQ $64, DX
	ADDQ $64, SI
	SUBQ $16, CX
	JNZ  mrcol
	DECQ R9
	JNZ  mrrow
	VZEROUPPER
	RET

// func kdaStepAVX512(S, k, q, e, v, o *float32, beta float32, dk, dv int)
// One token of the KDA recurrence for one head, 16 value columns at a time
// (dv a multiple of 16): for each block of columns,
//
//	S[d] ⊙= e[d];  p = Σ_d k[d]·S[d]              (decay, prediction)
//	u = β(v − p);  S[d] += k[d]·u;  o = Σ_d q[d]·S[d]
TEXT ·kdaStepAVX512(SB), NOSPLIT, $0-72
	MOVQ S+0(FP), SI
	MOVQ k+8(FP), R12
	MOVQ q+16(FP), R13
	MOVQ e+24(FP), R14
	MOVQ v+32(FP), DI
	MOVQ o+40(FP), DX
	VBROADCASTSS beta+48(FP), Z7
	MOVQ dk+56(FP), R9
	MOVQ dv+64(FP), CX
	MOVQ CX, R8
	SHLQ $2, R8 // row stride in bytes
ksblk:
	VPXORD Z0, Z0, Z0
	MOVQ SI, R10
	XORQ R11, R11
kspass1:
	VBROADCASTSS (R14)(R11*4), Z1
	VMULPS (R10), Z1, Z2
	VMOVUPS Z2, (R10)
	VBROADCASTSS (R12)(R11*4), Z3
	VFMADD231PS Z2, Z3, Z0
	ADDQ R8, R10
	INCQ R11
	CMPQ R11, R9
	JL   kspass1
	VMOVUPS (DI), Z4
	VSUBPS Z0, Z4, Z4
	VMULPS Z7, Z4, Z4 // u
	VPXORD Z0, Z0, Z0
	MOVQ SI, R10
	XORQ R11, R11
kspass2:
	VBROADCASTSS (R12)(R11*4), Z3
	VMOVUPS (R10), Z2
	VFMADD231PS Z4, Z3, Z2
	VMOVUPS Z2, (R10)
	VBROADCASTSS (R13)(R11*4), Z5
	VFMADD231PS Z2, Z5, Z0
	ADDQ R8, R10
	INCQ R11
	CMPQ R11, R9
	JL   kspass2
	VMOVUPS Z0, (DX)
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $64, DX
	SUBQ $16, CX
	JNZ  ksblk
	VZEROUPPER
	RET
