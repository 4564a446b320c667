//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 activations, 16 float32 lanes per step; n is a multiple of 16
// (the Go wrappers finish the tail). exp is Cody–Waite range reduction
// (x = n·ln2 + r, |r| ≤ ln2/2) with Cephes' degree-6 expf polynomial and
// VSCALEFPS for 2^n, which saturates to 0 and +Inf without clamping:
// within 2 ulp of the float64 reference over the float32 range.

DATA actc<>+0(SB)/4, $0x3fb8aa3b  // log2(e)
DATA actc<>+4(SB)/4, $0x3f318000  // C1 = 0.693359375
DATA actc<>+8(SB)/4, $0xb95e8083  // C2 = -2.12194440e-4 (C1 + C2 = ln 2)
DATA actc<>+12(SB)/4, $0x39506967 // p0 = 1.9875691500e-4
DATA actc<>+16(SB)/4, $0x3ab743ce // p1 = 1.3981999507e-3
DATA actc<>+20(SB)/4, $0x3c088908 // p2 = 8.3334519073e-3
DATA actc<>+24(SB)/4, $0x3d2aa9c1 // p3 = 4.1665795894e-2
DATA actc<>+28(SB)/4, $0x3e2aaaaa // p4 = 1.6666665459e-1
DATA actc<>+32(SB)/4, $0x3f000000 // p5 = 0.5
DATA actc<>+36(SB)/4, $0x3f800000 // 1
DATA actc<>+40(SB)/4, $0x80000000 // sign bit
DATA actc<>+44(SB)/4, $0x7fffffff // abs mask
GLOBL actc<>(SB), RODATA|NOPTR, $48

// CONSTS loads the exp constants into Z16..Z27.
#define CONSTS \
	VBROADCASTSS actc<>+0(SB), Z16; \
	VBROADCASTSS actc<>+4(SB), Z17; \
	VBROADCASTSS actc<>+8(SB), Z18; \
	VBROADCASTSS actc<>+12(SB), Z19; \
	VBROADCASTSS actc<>+16(SB), Z20; \
	VBROADCASTSS actc<>+20(SB), Z21; \
	VBROADCASTSS actc<>+24(SB), Z22; \
	VBROADCASTSS actc<>+28(SB), Z23; \
	VBROADCASTSS actc<>+32(SB), Z24; \
	VBROADCASTSS actc<>+36(SB), Z25; \
	VBROADCASTSS actc<>+40(SB), Z26; \
	VBROADCASTSS actc<>+44(SB), Z27

// EXPPOLY reduces X = N·ln2 + r (|r| ≤ ln2/2; X becomes r) and sets
// P = e^r − 1 = r + r²·q(r) (X2 is clobbered).
#define EXPPOLY(X, N, P, X2) \
	VMULPS Z16, X, N; \
	VRNDSCALEPS $0, N, N; \
	VFNMADD231PS Z17, N, X; \
	VFNMADD231PS Z18, N, X; \
	VMOVAPS Z19, P; \
	VFMADD213PS Z20, X, P; \
	VFMADD213PS Z21, X, P; \
	VFMADD213PS Z22, X, P; \
	VFMADD213PS Z23, X, P; \
	VFMADD213PS Z24, X, P; \
	VMULPS X, X, X2; \
	VFMADD213PS X, X2, P

// EXP sets P = e^X = 2^N·(1 + (e^r − 1)) (X, N and X2 are clobbered).
#define EXP(X, N, P, X2) \
	EXPPOLY(X, N, P, X2); \
	VADDPS Z25, P, P; \
	VSCALEFPS N, P, P

// EXPM1 sets P = e^X − 1, accurate near 0: for |X| ≤ ln2/2 (N = 0) it is
// the polynomial r + r²·q(r) itself, with no 1 added and taken away
// (X, N, E, X2 and K1 are clobbered; Z31 must be zero).
#define EXPM1(X, N, P, E, X2) \
	EXPPOLY(X, N, P, X2); \
	VADDPS Z25, P, E; \
	VSCALEFPS N, E, E; \
	VSUBPS Z25, E, E; \
	VCMPPS $0, Z31, N, K1; \
	VMOVAPS P, K1, E; \
	VMOVAPS E, P

// func expAVX512(dst, src *float32, n int)
TEXT ·expAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DX
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CONSTS
exploop:
	CMPQ CX, $16
	JL   expdone
	VMOVUPS (SI), Z0
	EXP(Z0, Z1, Z2, Z3)
	VMOVUPS Z2, (DX)
	ADDQ $64, SI
	ADDQ $64, DX
	SUBQ $16, CX
	JMP  exploop
expdone:
	VZEROUPPER
	RET

// func sigmoidAVX512(dst, src *float32, n int)
// dst = 1/(1+e^{−src}); dst may alias src.
TEXT ·sigmoidAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DX
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CONSTS
sigloop:
	CMPQ CX, $16
	JL   sigdone
	VMOVUPS (SI), Z0
	VPXORD Z26, Z0, Z0
	EXP(Z0, Z1, Z2, Z3)
	VADDPS Z25, Z2, Z2
	VDIVPS Z2, Z25, Z2
	VMOVUPS Z2, (DX)
	ADDQ $64, SI
	ADDQ $64, DX
	SUBQ $16, CX
	JMP  sigloop
sigdone:
	VZEROUPPER
	RET

// func gluSiLUAVX512(out, gate, up *float32, n int)
// out = gate·up / (1+e^{−gate}); out may alias gate or up.
TEXT ·gluSiLUAVX512(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DX
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DI
	MOVQ n+24(FP), CX
	CONSTS
siluloop:
	CMPQ CX, $16
	JL   siludone
	VMOVUPS (SI), Z0
	VMOVUPS (DI), Z1
	VPXORD Z26, Z0, Z2
	EXP(Z2, Z3, Z4, Z5)
	VADDPS Z25, Z4, Z4
	VMULPS Z1, Z0, Z6
	VDIVPS Z4, Z6, Z6
	VMOVUPS Z6, (DX)
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $64, DX
	SUBQ $16, CX
	JMP  siluloop
siludone:
	VZEROUPPER
	RET

// func gluSiTUAVX512(out, gate, up *float32, n int, beta, betaLin float32)
// out = β·tanh(gate/β)·σ(gate) · β_lin·tanh(up/β_lin) (β_lin > 0). With
// m = expm1(−2|y|), tanh|y| = −m/(2+m), so with one division
// out = ±β·β_lin·m_g·m_u / ((2+m_g)(2+m_u)(1+e^{−gate})), the sign that of
// gate·up.
TEXT ·gluSiTUAVX512(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DX
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DI
	MOVQ n+24(FP), CX
	CONSTS
	VPXORD Z31, Z31, Z31
	// Z28 = −2/β, Z29 = −2/β_lin, Z30 = β·β_lin
	MOVL $0xc0000000, AX // −2
	VMOVD AX, X8
	VDIVSS beta+32(FP), X8, X9
	VBROADCASTSS X9, Z28
	VDIVSS betaLin+36(FP), X8, X9
	VBROADCASTSS X9, Z29
	VMOVSS beta+32(FP), X9
	VMULSS betaLin+36(FP), X9, X9
	VBROADCASTSS X9, Z30
situloop:
	CMPQ CX, $16
	JL   situdone
	VMOVUPS (SI), Z0
	VMOVUPS (DI), Z1
	VPXORD Z26, Z0, Z2
	EXP(Z2, Z3, Z4, Z5)
	VPANDD Z27, Z0, Z6
	VMULPS Z28, Z6, Z6
	EXPM1(Z6, Z3, Z7, Z13, Z5)
	VPANDD Z27, Z1, Z8
	VMULPS Z29, Z8, Z8
	EXPM1(Z8, Z3, Z9, Z13, Z5)
	VADDPS Z25, Z4, Z4
	VADDPS Z25, Z25, Z14
	VADDPS Z14, Z7, Z10
	VADDPS Z14, Z9, Z11
	VMULPS Z10, Z4, Z4
	VMULPS Z11, Z4, Z4
	VMULPS Z9, Z7, Z7
	VMULPS Z30, Z7, Z7
	VDIVPS Z4, Z7, Z7
	VPXORD Z1, Z0, Z12
	VPANDD Z26, Z12, Z12
	VPXORD Z12, Z7, Z7
	VMOVUPS Z7, (DX)
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $64, DX
	SUBQ $16, CX
	JMP  situloop
situdone:
	VZEROUPPER
	RET

// func siluAVX512(dst, src *float32, n int)
// dst = src/(1+e^{−src}); dst may alias src.
TEXT ·siluAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DX
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CONSTS
slloop:
	CMPQ CX, $16
	JL   sldone
	VMOVUPS (SI), Z0
	VPXORD Z26, Z0, Z1
	EXP(Z1, Z2, Z3, Z4)
	VADDPS Z25, Z3, Z3
	VDIVPS Z3, Z0, Z0
	VMOVUPS Z0, (DX)
	ADDQ $64, SI
	ADDQ $64, DX
	SUBQ $16, CX
	JMP  slloop
sldone:
	VZEROUPPER
	RET
