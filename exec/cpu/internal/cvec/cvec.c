//go:build cgo

// Loops of package cpu in C, so that the compiler vectorises them: see
// cvec.go.

#include <stdint.h>
#include <string.h>
#include "cvec.h"

#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

// key maps a float's bits to an int32 whose order is the floats' order,
// every NaN above +Inf (cpu.orderKey).
static inline int32_t key(float v)
{
	uint32_t u;
	memcpy(&u, &v, 4);
	int32_t b = (int32_t)u;
	int32_t k = b ^ ((b >> 31) & 0x7fffffff);
	return (u & 0x7fffffffu) > 0x7f800000u ? 0x7fffffff : k;
}

static inline float unkey(int32_t k)
{
	uint32_t u = (uint32_t)(k ^ ((k >> 31) & 0x7fffffff));
	float v;
	memcpy(&v, &u, 4);
	return v;
}

// max2x2 is cpu.max2x2: the 2×2, stride-2 max-pool of one plane of width
// w into ho × wo, with each maximum's index in the plane; ties go to the
// first maximum.
CLONES
void max2x2(const float *src, float *dst, int *ix, int w, int ho, int wo)
{
	for (int oh = 0; oh < ho; oh++) {
		const float *restrict r0 = src + (long)2 * oh * w;
		const float *restrict r1 = r0 + w;
		float *restrict d = dst + (long)oh * wo;
		int *restrict id = ix + (long)oh * wo;
		int base = 2 * oh * w;
		for (int ow = 0; ow < wo; ow++) {
			int j = 2 * ow;
			int32_t ka = key(r0[j]), kb = key(r0[j + 1]), kc = key(r1[j]), kd = key(r1[j + 1]);
			int i0 = kb > ka ? 1 : 0;
			ka = kb > ka ? kb : ka;
			int i1 = kd > kc ? w + 1 : w;
			kc = kd > kc ? kd : kc;
			i0 = kc > ka ? i1 : i0;
			ka = kc > ka ? kc : ka;
			d[ow] = unkey(ka);
			id[ow] = base + j + i0;
		}
	}
}
