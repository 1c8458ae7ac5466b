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

// func requantVNNI(c *int32, cop int, groups int, co int, mul, bias *float32, corr *int32, relu int, y *float32, P int)
// For each channel o < co and 16·groups rows i of the int32 tile c (rows
// cop apart): y[o·P + i] = (c[i][o] − corr[o])·mul[o] + bias[o], then
// max(·, 0) when relu is 1. Sixteen rows of a channel are gathered into
// one register and stored as one contiguous run of the channel's block.
TEXT ·requantVNNI(SB), NOSPLIT, $0-80
	MOVQ c+0(FP), SI
	MOVQ cop+8(FP), BX
	MOVQ groups+16(FP), CX
	MOVQ co+24(FP), DX
	MOVQ mul+32(FP), R8
	MOVQ bias+40(FP), R9
	MOVQ corr+48(FP), R10
	MOVQ relu+56(FP), R11
	MOVQ y+64(FP), DI
	MOVQ P+72(FP), R12
	SHLQ $2, R12

	// Z31 = lane·cop, the gather's indices; Z30 = 0.
	VPBROADCASTD BX, Z29
	MOVQ         $0x0706050403020100, AX
	VMOVQ        AX, X28
	MOVQ         $0x0f0e0d0c0b0a0908, AX
	VPINSRQ      $1, AX, X28, X28
	VPMOVZXBD    X28, Z28
	VPMULLD      Z29, Z28, Z31
	VPXORD       Z30, Z30, Z30
	MOVQ         BX, R13
	SHLQ         $6, R13 // 16 rows of cop int32, in bytes

chan:
	TESTQ        DX, DX
	JZ           rdone
	VPBROADCASTD (R10), Z27
	VBROADCASTSS (R8), Z26
	VBROADCASTSS (R9), Z25
	MOVQ         SI, R14
	MOVQ         DI, R15
	MOVQ         CX, AX

grp:
	TESTQ       AX, AX
	JZ          gdone
	KXNORW      K1, K1, K1
	VPGATHERDD  (R14)(Z31*4), K1, Z0
	VPSUBD      Z27, Z0, Z0
	VCVTDQ2PS   Z0, Z0
	VFMADD132PS Z26, Z25, Z0
	TESTQ       R11, R11
	JZ          store
	VMAXPS      Z30, Z0, Z0

store:
	VMOVUPS Z0, (R15)
	ADDQ    R13, R14
	ADDQ    $64, R15
	DECQ    AX
	JMP     grp

gdone:
	ADDQ $4, SI
	ADDQ $4, R8
	ADDQ $4, R9
	ADDQ $4, R10
	ADDQ R12, DI
	DECQ DX
	JMP  chan

rdone:
	VZEROUPPER
	RET

// AROW multiplies one row's four bytes (at mem) into that row's two
// accumulators, channels 0-7 (acc0) and 8-15 (acc1) of the half block.
// Y12 = the row's bytes 0 and 2 as words, Y13 = bytes 1 and 3, both
// zero-extended; Y8/Y10 hold the weights' bytes 0 and 2 and Y9/Y11 bytes
// 1 and 3, sign-extended, so one VPMADDWD of each pair sums all four.
#define AROW(mem, acc0, acc1) \
	VPBROADCASTD mem, Y13       \
	VPAND        Y15, Y13, Y12  \
	VPSRLW       $8, Y13, Y13   \
	VPMADDWD     Y8, Y12, Y14   \
	VPADDD       Y14, acc0, acc0 \
	VPMADDWD     Y9, Y13, Y14   \
	VPADDD       Y14, acc0, acc0 \
	VPMADDWD     Y10, Y12, Y14  \
	VPADDD       Y14, acc1, acc1 \
	VPMADDWD     Y11, Y13, Y14  \
	VPADDD       Y14, acc1, acc1

// func dotAVX2(a *uint8, lda int, w *int8, k4 int, c *int32, ldc int, tiles int)
// dotVNNI's sums on AVX2, over the same operands. A tile is 4 rows × 16
// channels (eight ymm accumulators, one int32 lane per channel), each
// 32-channel block done as two halves. Bytes are widened to 16 bits by
// shifts within each word (a's zero-extended, w's sign-extended) and
// VPMADDWD adds two products into int32: |Σ| ≤ 2·255·128, so nothing
// saturates and the sums are dotGo's bit for bit (docs/design/int8-inference.md).
TEXT ·dotAVX2(SB), NOSPLIT, $0-56
	MOVQ a+0(FP), SI
	MOVQ lda+8(FP), BX
	MOVQ w+16(FP), DI
	MOVQ k4+24(FP), CX
	MOVQ c+32(FP), DX
	MOVQ ldc+40(FP), R8
	SHLQ $2, R8
	MOVQ tiles+48(FP), R9
	LEAQ (BX)(BX*2), R13 // 3·lda

	VPCMPEQW Y15, Y15, Y15
	VPSRLW   $8, Y15, Y15  // 0x00ff in every word

atile:
	TESTQ R9, R9
	JZ    adone
	XORQ  R11, R11 // the half's byte offset in a block: 0, then 64

ahalf:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	MOVQ  SI, R10
	LEAQ  (DI)(R11*1), R14
	MOVQ  CX, AX
	TESTQ AX, AX
	JZ    astore

akloop:
	VMOVDQU (R14), Y8
	VMOVDQU 32(R14), Y10
	VPSRAW  $8, Y8, Y9
	VPSLLW  $8, Y8, Y8
	VPSRAW  $8, Y8, Y8
	VPSRAW  $8, Y10, Y11
	VPSLLW  $8, Y10, Y10
	VPSRAW  $8, Y10, Y10
	AROW((R10), Y0, Y1)
	AROW((R10)(BX*1), Y2, Y3)
	AROW((R10)(BX*2), Y4, Y5)
	AROW((R10)(R13*1), Y6, Y7)
	ADDQ    $128, R14
	ADDQ    $4, R10
	DECQ    AX
	JNZ     akloop

astore:
	LEAQ    (DX)(R11*1), R12 // the half's 16 int32 sums, 64 bytes in
	VMOVDQU Y0, (R12)
	VMOVDQU Y1, 32(R12)
	ADDQ    R8, R12
	VMOVDQU Y2, (R12)
	VMOVDQU Y3, 32(R12)
	ADDQ    R8, R12
	VMOVDQU Y4, (R12)
	VMOVDQU Y5, 32(R12)
	ADDQ    R8, R12
	VMOVDQU Y6, (R12)
	VMOVDQU Y7, 32(R12)
	ADDQ    $64, R11
	CMPQ    R11, $128
	JNE     ahalf

	LEAQ (SI)(BX*4), SI
	LEAQ (DX)(R8*4), DX
	DECQ R9
	JMP  atile

adone:
	VZEROUPPER
	RET
