//go:build amd64 && !purego

#include "textflag.h"

// func quantBlocksAVX512(x *float32, nblk, bl int, q *int8, d *float32, s16 *int32)
//
// quantBlock of each of nblk blocks of bl values (bl a multiple of 16):
// d[b] = max|x|/127, q = round-to-even(x·(127/max|x|)), q = 0 for a block
// of zeros; s16[i] = Σ of q over values 16i … 16i+15.
TEXT ·quantBlocksAVX512(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ nblk+8(FP), BX
	MOVQ bl+16(FP), R8
	MOVQ q+24(FP), DI
	MOVQ d+32(FP), DX
	MOVQ s16+40(FP), R10
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z31
	MOVL $0x80808080, AX
	VPBROADCASTD AX, X7
	VPXOR X3, X3, X3
	MOVL $0x42fe0000, AX // 127
	VMOVD AX, X6
qbblock:
	TESTQ BX, BX
	JZ   qbdone
	VPXORD Z0, Z0, Z0
	MOVQ SI, R9
	MOVQ R8, CX
qbmax:
	VPANDD (R9), Z31, Z1
	VMAXPS Z1, Z0, Z0
	ADDQ $64, R9
	SUBQ $16, CX
	JNZ  qbmax
	VEXTRACTF64X4 $1, Z0, Y1
	VMAXPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXPS X1, X0, X0
	VDIVSS X6, X0, X2 // amax/127
	VMOVSS X2, (DX)
	VXORPS X4, X4, X4
	VUCOMISS X4, X0
	JEQ  qbzero
	VDIVSS X0, X6, X4 // 127/amax
qbzero:
	VBROADCASTSS X4, Z4
	MOVQ R8, CX
qbq:
	VMULPS (SI), Z4, Z5
	VCVTPS2DQ Z5, Z5
	VPMOVSDB Z5, X5
	VMOVDQU X5, (DI)
	// Σ q: bytes offset by 128 summed by VPSADBW, less 16·128.
	VPXOR X7, X5, X5
	VPSADBW X3, X5, X5
	VPSHUFD $0x4e, X5, X8
	VPADDQ X8, X5, X5
	VMOVD X5, AX
	SUBL $2048, AX
	MOVL AX, (R10)
	ADDQ $4, R10
	ADDQ $64, SI
	ADDQ $16, DI
	SUBQ $16, CX
	JNZ  qbq
	ADDQ $4, DX
	DECQ BX
	JMP  qbblock
qbdone:
	VZEROUPPER
	RET
