#include "textflag.h"

// func dotVNNI(a *uint8, lda int, w *int8, k4 int, c *int32, ldc int, tiles int)
// For each tile of 4 rows of a (unsigned bytes, lda apart) and the 32
// output channels of one packed weight block w ([k4][32][4] signed
// bytes): c[r][j] = Σ_q Σ_b a[r][4q+b]·w[q][j][b], written (not added) to
// 4 rows of c (ldc int32 apart). VPDPBUSD sums four u8×s8 products into
// each int32 lane without saturation, so the sums are exact.
TEXT ·dotVNNI(SB), NOSPLIT, $0-56
	MOVQ a+0(FP), SI
	MOVQ lda+8(FP), BX
	MOVQ w+16(FP), DI
	MOVQ k4+24(FP), CX
	MOVQ c+32(FP), DX
	MOVQ ldc+40(FP), R8
	SHLQ $2, R8
	MOVQ tiles+48(FP), R9

tile:
	TESTQ R9, R9
	JZ    done
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	MOVQ SI, R10
	LEAQ (SI)(BX*1), R11
	LEAQ (SI)(BX*2), R12
	LEAQ (R11)(BX*2), R13
	MOVQ DI, R14
	MOVQ CX, AX

kloop:
	VMOVDQU32    (R14), Z8
	VMOVDQU32    64(R14), Z9
	VPBROADCASTD (R10), Z10
	VPBROADCASTD (R11), Z11
	VPBROADCASTD (R12), Z12
	VPBROADCASTD (R13), Z13
	VPDPBUSD     Z8, Z10, Z0
	VPDPBUSD     Z9, Z10, Z1
	VPDPBUSD     Z8, Z11, Z2
	VPDPBUSD     Z9, Z11, Z3
	VPDPBUSD     Z8, Z12, Z4
	VPDPBUSD     Z9, Z12, Z5
	VPDPBUSD     Z8, Z13, Z6
	VPDPBUSD     Z9, Z13, Z7
	ADDQ         $128, R14
	ADDQ         $4, R10
	ADDQ         $4, R11
	ADDQ         $4, R12
	ADDQ         $4, R13
	DECQ         AX
	JNZ          kloop

	MOVQ      DX, R10
	VMOVDQU32 Z0, (R10)
	VMOVDQU32 Z1, 64(R10)
	ADDQ      R8, R10
	VMOVDQU32 Z2, (R10)
	VMOVDQU32 Z3, 64(R10)
	ADDQ      R8, R10
	VMOVDQU32 Z4, (R10)
	VMOVDQU32 Z5, 64(R10)
	ADDQ      R8, R10
	VMOVDQU32 Z6, (R10)
	VMOVDQU32 Z7, 64(R10)
	LEAQ      (SI)(BX*4), SI
	LEAQ      (DX)(R8*4), DX
	DECQ      R9
	JMP       tile

done:
	VZEROUPPER
	RET
