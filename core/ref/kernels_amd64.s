//go:build amd64 && !purego

#include "textflag.h"

// AVX2 + FMA (+ F16C) kernels. Callers check useAVX2 and pass n ≥ 0 with
// every pointer valid for n elements (or any pointer when n == 0 is not
// passed: the Go wrappers never call with n == 0).

// REDUCE4 folds Y0..Y3 into the low lane of X0 (upper lanes of X0 keep
// partial sums to be folded by HSUMX0).
#define REDUCE4 \
	VADDPS Y1, Y0, Y0; \
	VADDPS Y3, Y2, Y2; \
	VADDPS Y2, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0

// HSUMX0 sums the four lanes of X0 into its low lane.
#define HSUMX0 \
	VMOVHLPS X0, X0, X1; \
	VADDPS X1, X0, X0; \
	VMOVSHDUP X0, X1; \
	VADDSS X1, X0, X0

// func dotAVX2(a, b *float32, n int) float32
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

dot32:
	CMPQ CX, $32
	JL   dot8
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  dot32

dot8:
	CMPQ CX, $8
	JL   dotfold
	VMOVUPS (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  dot8

dotfold:
	REDUCE4
	TESTQ CX, CX
	JE    dotdone

dot1:
	VMOVSS (SI), X4
	VFMADD231SS (DI), X4, X0
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JNE  dot1

dotdone:
	HSUMX0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotBF16AVX2(w *uint16, x *float32, n int) float32
TEXT ·dotBF16AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

bdot32:
	CMPQ CX, $32
	JL   bdot8
	VPMOVZXWD (SI), Y4
	VPMOVZXWD 16(SI), Y5
	VPMOVZXWD 32(SI), Y6
	VPMOVZXWD 48(SI), Y7
	VPSLLD $16, Y4, Y4
	VPSLLD $16, Y5, Y5
	VPSLLD $16, Y6, Y6
	VPSLLD $16, Y7, Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $64, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  bdot32

bdot8:
	CMPQ CX, $8
	JL   bdotfold
	VPMOVZXWD (SI), Y4
	VPSLLD $16, Y4, Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  bdot8

bdotfold:
	REDUCE4
	TESTQ CX, CX
	JE    bdotdone

bdot1:
	MOVWLZX (SI), AX
	SHLL    $16, AX
	VMOVD   AX, X4
	VFMADD231SS (DI), X4, X0
	ADDQ $2, SI
	ADDQ $4, DI
	DECQ CX
	JNE  bdot1

bdotdone:
	HSUMX0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotF16AVX2(w *uint16, x *float32, n int) float32
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

hdot32:
	CMPQ CX, $32
	JL   hdot8
	VCVTPH2PS (SI), Y4
	VCVTPH2PS 16(SI), Y5
	VCVTPH2PS 32(SI), Y6
	VCVTPH2PS 48(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $64, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  hdot32

hdot8:
	CMPQ CX, $8
	JL   hdotfold
	VCVTPH2PS (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  hdot8

hdotfold:
	REDUCE4
	TESTQ CX, CX
	JE    hdotdone

hdot1:
	MOVWLZX (SI), AX
	VMOVD   AX, X4
	VCVTPH2PS X4, X4
	VFMADD231SS (DI), X4, X0
	ADDQ $2, SI
	ADDQ $4, DI
	DECQ CX
	JNE  hdot1

hdotdone:
	HSUMX0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func axpyAVX2(a float32, x, y *float32, n int)
TEXT ·axpyAVX2(SB), NOSPLIT, $0-32
	VBROADCASTSS a+0(FP), Y0
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DI
	MOVQ n+24(FP), CX

axpy32:
	CMPQ CX, $32
	JL   axpy8
	VMOVUPS (DI), Y1
	VMOVUPS 32(DI), Y2
	VMOVUPS 64(DI), Y3
	VMOVUPS 96(DI), Y4
	VFMADD231PS (SI), Y0, Y1
	VFMADD231PS 32(SI), Y0, Y2
	VFMADD231PS 64(SI), Y0, Y3
	VFMADD231PS 96(SI), Y0, Y4
	VMOVUPS Y1, (DI)
	VMOVUPS Y2, 32(DI)
	VMOVUPS Y3, 64(DI)
	VMOVUPS Y4, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  axpy32

axpy8:
	CMPQ CX, $8
	JL   axpy1
	VMOVUPS (DI), Y1
	VFMADD231PS (SI), Y0, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  axpy8

axpy1:
	TESTQ CX, CX
	JE    axpydone
	VMOVSS (DI), X1
	VFMADD231SS (SI), X0, X1
	VMOVSS X1, (DI)
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JMP  axpy1

axpydone:
	VZEROUPPER
	RET

// func widenBF16AVX2(dst *float32, src *uint16, n int)
TEXT ·widenBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

wb16:
	CMPQ CX, $16
	JL   wb1
	VPMOVZXWD (SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPSLLD $16, Y0, Y0
	VPSLLD $16, Y1, Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ $32, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  wb16

wb1:
	TESTQ CX, CX
	JE    wbdone
	MOVWLZX (SI), AX
	SHLL    $16, AX
	MOVL    AX, (DI)
	ADDQ $2, SI
	ADDQ $4, DI
	DECQ CX
	JMP  wb1

wbdone:
	VZEROUPPER
	RET

// func widenF16AVX2(dst *float32, src *uint16, n int)
TEXT ·widenF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

wh16:
	CMPQ CX, $16
	JL   wh1
	VCVTPH2PS (SI), Y0
	VCVTPH2PS 16(SI), Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ $32, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  wh16

wh1:
	TESTQ CX, CX
	JE    whdone
	MOVWLZX (SI), AX
	VMOVD   AX, X0
	VCVTPH2PS X0, X0
	VMOVSS  X0, (DI)
	ADDQ $2, SI
	ADDQ $4, DI
	DECQ CX
	JMP  wh1

whdone:
	VZEROUPPER
	RET

// HSUM folds the eight lanes of Y register y into the low lane of its X
// alias x, using X15 as scratch, and stores it at addr.
#define HSTORE(y, x, addr) \
	VEXTRACTF128 $1, y, X15; \
	VADDPS X15, x, x; \
	VMOVHLPS x, x, X15; \
	VADDPS X15, x, x; \
	VMOVSHDUP x, X15; \
	VADDSS X15, x, x; \
	VMOVSS x, addr

// func gemm3x4AVX2(w *float32, ldw int, x *float32, ldx int, n int, out *float32, ldo int)
//
// For r < 3 and t < 4: out[t*ldo+r] = Σ_{k < n&^7} w[r*ldw+k]·x[t*ldx+k].
// The caller adds the n%8 tail.
TEXT ·gemm3x4AVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ ldw+8(FP), AX
	SHLQ $2, AX
	LEAQ (SI)(AX*1), R8
	LEAQ (R8)(AX*1), R9
	MOVQ x+16(FP), DI
	MOVQ ldx+24(FP), BX
	SHLQ $2, BX
	LEAQ (DI)(BX*1), R10
	LEAQ (R10)(BX*1), R11
	LEAQ (R11)(BX*1), R12
	MOVQ n+32(FP), CX
	SHRQ $3, CX
	XORQ DX, DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	TESTQ CX, CX
	JE    g34store

g34loop:
	VMOVUPS (SI)(DX*1), Y12
	VMOVUPS (R8)(DX*1), Y13
	VMOVUPS (R9)(DX*1), Y14
	VMOVUPS (DI)(DX*1), Y15
	VFMADD231PS Y15, Y12, Y0
	VFMADD231PS Y15, Y13, Y1
	VFMADD231PS Y15, Y14, Y2
	VMOVUPS (R10)(DX*1), Y15
	VFMADD231PS Y15, Y12, Y3
	VFMADD231PS Y15, Y13, Y4
	VFMADD231PS Y15, Y14, Y5
	VMOVUPS (R11)(DX*1), Y15
	VFMADD231PS Y15, Y12, Y6
	VFMADD231PS Y15, Y13, Y7
	VFMADD231PS Y15, Y14, Y8
	VMOVUPS (R12)(DX*1), Y15
	VFMADD231PS Y15, Y12, Y9
	VFMADD231PS Y15, Y13, Y10
	VFMADD231PS Y15, Y14, Y11
	ADDQ $32, DX
	DECQ CX
	JNE  g34loop

g34store:
	MOVQ out+40(FP), DI
	MOVQ ldo+48(FP), BX
	SHLQ $2, BX
	HSTORE(Y0, X0, (DI))
	HSTORE(Y1, X1, 4(DI))
	HSTORE(Y2, X2, 8(DI))
	ADDQ BX, DI
	HSTORE(Y3, X3, (DI))
	HSTORE(Y4, X4, 4(DI))
	HSTORE(Y5, X5, 8(DI))
	ADDQ BX, DI
	HSTORE(Y6, X6, (DI))
	HSTORE(Y7, X7, 4(DI))
	HSTORE(Y8, X8, 8(DI))
	ADDQ BX, DI
	HSTORE(Y9, X9, (DI))
	HSTORE(Y10, X10, 4(DI))
	HSTORE(Y11, X11, 8(DI))
	VZEROUPPER
	RET
