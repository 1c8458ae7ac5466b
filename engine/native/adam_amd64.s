#include "textflag.h"

// func adamAVX2(p, grad, m1, m2 *float32, n int, k *adamConsts)
// Eight values at a time, in the same order of operations as adamGo, so
// both give the same bits:
//   d  = g + wd·p;  p *= keep
//   m1 = b1·m1 + c1·d
//   m2 = b2·m2 + (c2·d)·d
//   p -= step·(m1 / (sqrt(m2)/bc2 + eps))
TEXT ·adamAVX2(SB), NOSPLIT, $0-48
	MOVQ p+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m1+16(FP), R8
	MOVQ m2+24(FP), R9
	MOVQ n+32(FP), CX
	MOVQ k+40(FP), AX
	VBROADCASTSS 0(AX), Y8
	VBROADCASTSS 4(AX), Y9
	VBROADCASTSS 8(AX), Y10
	VBROADCASTSS 12(AX), Y11
	VBROADCASTSS 16(AX), Y12
	VBROADCASTSS 20(AX), Y13
	VBROADCASTSS 24(AX), Y14
	VBROADCASTSS 28(AX), Y15
	VBROADCASTSS 32(AX), Y7
	XORQ BX, BX

loop:
	CMPQ CX, $8
	JL   done
	VMOVUPS (DI)(BX*4), Y0
	VMOVUPS (SI)(BX*4), Y1
	VMULPS  Y15, Y0, Y2
	VADDPS  Y2, Y1, Y1
	VMULPS  Y7, Y0, Y0
	VMOVUPS (R8)(BX*4), Y3
	VMULPS  Y8, Y3, Y3
	VMULPS  Y9, Y1, Y4
	VADDPS  Y4, Y3, Y3
	VMOVUPS Y3, (R8)(BX*4)
	VMOVUPS (R9)(BX*4), Y5
	VMULPS  Y10, Y5, Y5
	VMULPS  Y11, Y1, Y6
	VMULPS  Y1, Y6, Y6
	VADDPS  Y6, Y5, Y5
	VMOVUPS Y5, (R9)(BX*4)
	VSQRTPS Y5, Y5
	VDIVPS  Y12, Y5, Y5
	VADDPS  Y13, Y5, Y5
	VDIVPS  Y5, Y3, Y3
	VMULPS  Y14, Y3, Y3
	VSUBPS  Y3, Y0, Y0
	VMOVUPS Y0, (DI)(BX*4)
	ADDQ    $8, BX
	SUBQ    $8, CX
	JMP     loop

done:
	VZEROUPPER
	RET
