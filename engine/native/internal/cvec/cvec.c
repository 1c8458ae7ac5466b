//go:build cgo

// Loops of package native in C, so that the compiler vectorises them: see
// cvec.go.

#include <stdint.h>
#include <math.h>
#include <string.h>
#include <immintrin.h>
#include "cvec.h"

#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

// key maps a float's bits to an int32 whose order is the floats' order,
// every NaN above +Inf (native.orderKey).
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

// max2x2 is native.max2x2: the 2×2, stride-2 max-pool of one plane of width
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

// max2x2_planes_c is max2x2 on n planes of h×w one after another (h =
// 2·ho or 2·ho+1), each index within its own plane.
CLONES
static void max2x2_planes_c(const float *src, float *dst, int *ix, int w, int h, int ho, int wo, int n)
{
	for (int p = 0; p < n; p++)
		max2x2(src + (long)p * h * w, dst + (long)p * ho * wo, ix + (long)p * ho * wo, w, ho, wo);
}

static inline uint32_t bits(float v)
{
	uint32_t u;
	memcpy(&u, &v, 4);
	return u;
}

static inline float from(uint32_t u)
{
	float v;
	memcpy(&v, &u, 4);
	return v;
}

// relu32 is native.relu32: negative values and -0 give +0, NaN stays.
static inline float relu32(float v)
{
	uint32_t u = bits(v);
	uint32_t neg = (uint32_t)((int32_t)u >> 31);
	uint32_t nan = (uint32_t)((int32_t)(0x7f800000u - (u & 0x7fffffffu)) >> 31);
	return from(u & ~(neg & ~nan));
}

// keep_if_pos is native.keepIfPos: g where out > 0, else +0.
static inline float keep_if_pos(float g, float out)
{
	uint32_t m = bits(out);
	return from(bits(g) & (0u - ((0u - m) >> 31)));
}

// The loops below are built as ISO C (-std=c11, cvec.go), where GCC does
// not contract a multiply and an add into one FMA: a multiply
// and an add stay two roundings, as in Go, so each gives Go's bits.

CLONES
void affine_relu(float *dst, const float *src, float a, float b, long n)
{
	for (long i = 0; i < n; i++)
		dst[i] = relu32(a * src[i] + b);
}

// bn_dx is native.bnDx; dx may be g.
CLONES
void bn_dx(float *dx, const float *g, const float *x, const float *out, float mean, float k, float fn, float sg, float xk, int relu, int acc, long n)
{
	if (relu) {
		if (acc)
			for (long i = 0; i < n; i++)
				dx[i] += k * (fn * keep_if_pos(g[i], out[i]) - sg - (x[i] - mean) * xk);
		else
			for (long i = 0; i < n; i++)
				dx[i] = k * (fn * keep_if_pos(g[i], out[i]) - sg - (x[i] - mean) * xk);
	} else {
		if (acc)
			for (long i = 0; i < n; i++)
				dx[i] += k * (fn * g[i] - sg - (x[i] - mean) * xk);
		else
			for (long i = 0; i < n; i++)
				dx[i] = k * (fn * g[i] - sg - (x[i] - mean) * xk);
	}
}

// sum64 is native.sum64: four float64 accumulators over i mod 4, the tail
// into the first, (s0+s1)+(s2+s3).
CLONES
double sum64(const float *x, long n)
{
	double s[4] = {0, 0, 0, 0};
	long i = 0;
	for (; i + 4 <= n; i += 4)
		for (int j = 0; j < 4; j++)
			s[j] += (double)x[i + j];
	for (; i < n; i++)
		s[0] += (double)x[i];
	return (s[0] + s[1]) + (s[2] + s[3]);
}

// sum_sq_dev is the second pass of native.meanVar: Σ (x-m)² with four
// float32 accumulators within each block of 512, ((q0+q1)+q2)+q3 added
// to a float64 per block.
CLONES
double sum_sq_dev(const float *x, float m, long n)
{
	double q = 0;
	for (long blk = 0; blk < n; blk += 512) {
		long e = blk + 512 < n ? blk + 512 : n;
		float a[4] = {0, 0, 0, 0};
		long i = blk;
		for (; i + 4 <= e; i += 4)
			for (int j = 0; j < 4; j++) {
				float d = x[i + j] - m;
				a[j] += d * d;
			}
		for (; i < e; i++) {
			float d = x[i] - m;
			a[0] += d * d;
		}
		q += (double)(((a[0] + a[1]) + a[2]) + a[3]);
	}
	return q;
}

// sum_centered is native.sumCentered: accumulators over i mod 2, in float64.
CLONES
void sum_centered(const float *g, const float *x, const float *out, float mean, int relu, long n, double *sg, double *sgx)
{
	double s[2] = {0, 0}, t[2] = {0, 0};
	double m = (double)mean;
	long i = 0;
	if (relu) {
		for (; i + 2 <= n; i += 2)
			for (int j = 0; j < 2; j++) {
				double v = (double)keep_if_pos(g[i + j], out[i + j]);
				s[j] += v;
				t[j] += v * ((double)x[i + j] - m);
			}
	} else {
		for (; i + 2 <= n; i += 2)
			for (int j = 0; j < 2; j++) {
				double v = (double)g[i + j];
				s[j] += v;
				t[j] += v * ((double)x[i + j] - m);
			}
	}
	for (; i < n; i++) {
		double v = (double)(relu ? keep_if_pos(g[i], out[i]) : g[i]);
		s[0] += v;
		t[0] += v * ((double)x[i] - m);
	}
	*sg = s[0] + s[1];
	*sgx = t[0] + t[1];
}

// The int8 layers' loops (package native's int8.go). Sums are int32 that wrap
// as Go's do: their differences are taken in uint32.

// clamp_round_u8 is native.actQuant.u8: round(v·inv) (halves away from zero)
// clamped to [lo, hi], plus zero. The value is clamped before it is
// rounded, which gives native.clampRound's result for every float (NaN
// included: lo) without a branch, so that the loop vectorises.
static inline uint8_t clamp_round_u8(float v, float inv, float lo, float hi, int32_t zero)
{
	float t = v * inv;
	t = t > lo ? t : lo;
	t = t < hi ? t : hi;
	// t − 0.5 is −(−t + 0.5) exactly: rounding is symmetric.
	int32_t r = (int32_t)(t + (t < 0 ? -0.5f : 0.5f));
	return (uint8_t)(r + zero);
}

// quant_u8 is native.actQuant.quantRow: dst[i] = u8(src[i]).
CLONES
void quant_u8(uint8_t *restrict dst, const float *restrict src, float inv, int lo, int hi, int zero, long n)
{
	float flo = (float)lo, fhi = (float)hi;
	for (long i = 0; i < n; i++)
		dst[i] = clamp_round_u8(src[i], inv, flo, fhi, zero);
}

// quant_nhwc is native.qconvKernel.quantNHWC: pixels [p0, p1) of ci planes
// of pix floats (channel-major) quantised to bytes, pixel-major.
CLONES
void quant_nhwc(uint8_t *restrict xq, const float *restrict x, long pix, int ci, long p0, long p1, float inv, int lo, int hi, int zero)
{
	float flo = (float)lo, fhi = (float)hi;
	uint8_t t[256];
	for (long b = p0; b < p1; b += 256) {
		long e = b + 256 < p1 ? b + 256 : p1;
		for (int c = 0; c < ci; c++) {
			const float *restrict s = x + (long)c * pix + b;
			for (long i = 0; i < e - b; i++)
				t[i] = clamp_round_u8(s[i], inv, flo, fhi, zero);
			for (long i = 0; i < e - b; i++)
				xq[(b + i) * ci + c] = t[i];
		}
	}
}

// requant is the float of an int32 sum: (c − corr)·mul + bias, a multiply
// and an add (two roundings, as in Go).
static inline float requant(int32_t c, int32_t corr, float mul, float bias)
{
	return (float)(int32_t)((uint32_t)c - (uint32_t)corr) * mul + bias;
}

// requant_t is native.qlayer.requantGo with no activation or a relu: rows
// int32 sums of co channels (a row cop apart) to the channel-major y,
// y[o·P + i] for i < rows.
CLONES
void requant_t(float *y, long P, const int32_t *c, long cop, long rows, long co, const float *mul, const float *bias, const int32_t *corr, int relu)
{
	for (long o = 0; o < co; o++) {
		float m = mul[o], b = bias[o];
		int32_t cr = corr[o];
		float *restrict d = y + o * P;
		const int32_t *restrict s = c + o;
		if (relu)
			for (long i = 0; i < rows; i++)
				d[i] = relu32(requant(s[i * cop], cr, m, b));
		else
			for (long i = 0; i < rows; i++)
				d[i] = requant(s[i * cop], cr, m, b);
	}
}

// requant_row is native.qdenseKernel's requantisation of one row: dst[o] for
// o < n, then a relu when asked.
CLONES
void requant_row(float *restrict dst, const int32_t *restrict c, const float *restrict mul, const float *restrict bias, const int32_t *restrict corr, int relu, long n)
{
	if (relu)
		for (long o = 0; o < n; o++)
			dst[o] = relu32(requant(c[o], corr[o], mul[o], bias[o]));
	else
		for (long o = 0; o < n; o++)
			dst[o] = requant(c[o], corr[o], mul[o], bias[o]);
}

// max2x2_planes_eval is max2x2_planes without the indices, for
// inference: the same maxima (the maximum of the four keys, whatever the
// order). Rows of 14 or 7 outputs are too short for a compiler to
// vectorise well (it took a fifth of the fashion net's int8 pass), so
// AVX-512 and AVX2 take a row pair at a time by hand: keys of both rows,
// their maxima, then the even and odd columns' maxima after a
// deinterleave; a masked load and store cover each row's tail.
static void max2x2_planes_eval_c(const float *src, float *dst, int w, int h, int ho, int wo, int n);

#define KEY_AVX512(x) ({ __m512i b_ = (x); \
	__m512i k_ = _mm512_xor_si512(b_, _mm512_srli_epi32(_mm512_srai_epi32(b_, 31), 1)); \
	__mmask16 nan_ = _mm512_cmpgt_epi32_mask(_mm512_and_si512(b_, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000)); \
	_mm512_mask_mov_epi32(k_, nan_, _mm512_set1_epi32(0x7fffffff)); })

__attribute__((target("avx512f")))
static void max2x2_planes_eval_avx512(const float *src, float *dst, int w, int h, int ho, int wo, int n)
{
	const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
	const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
	for (long p = 0; p < n; p++)
		for (long oh = 0; oh < ho; oh++) {
			const float *r0 = src + p * h * w + 2 * oh * w, *r1 = r0 + w;
			float *d = dst + (p * ho + oh) * wo;
			for (int s = 0; s < wo; s += 16) {
				int cnt = wo - s < 16 ? wo - s : 16;
				int in = 2 * cnt;
				__mmask16 mlo = in >= 16 ? 0xffff : (__mmask16)((1u << in) - 1);
				__mmask16 mhi = in <= 16 ? 0 : (__mmask16)((1u << (in - 16)) - 1);
				const float *a = r0 + 2 * s, *b = r1 + 2 * s;
				__m512i lo = _mm512_max_epi32(KEY_AVX512(_mm512_maskz_loadu_epi32(mlo, a)), KEY_AVX512(_mm512_maskz_loadu_epi32(mlo, b)));
				__m512i hi = _mm512_max_epi32(KEY_AVX512(_mm512_maskz_loadu_epi32(mhi, a + 16)), KEY_AVX512(_mm512_maskz_loadu_epi32(mhi, b + 16)));
				__m512i m = _mm512_max_epi32(_mm512_permutex2var_epi32(lo, even, hi), _mm512_permutex2var_epi32(lo, odd, hi));
				m = _mm512_xor_si512(m, _mm512_srli_epi32(_mm512_srai_epi32(m, 31), 1));
				_mm512_mask_storeu_epi32(d + s, (__mmask16)((1u << cnt) - 1), m);
			}
		}
}

#define KEY_AVX2(x) ({ __m256i b_ = (x); \
	__m256i k_ = _mm256_xor_si256(b_, _mm256_srli_epi32(_mm256_srai_epi32(b_, 31), 1)); \
	__m256i nan_ = _mm256_cmpgt_epi32(_mm256_and_si256(b_, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000)); \
	_mm256_blendv_epi8(k_, _mm256_set1_epi32(0x7fffffff), nan_); })

__attribute__((target("avx2")))
static inline __m256i lanes_avx2(int k)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

__attribute__((target("avx2")))
static void max2x2_planes_eval_avx2(const float *src, float *dst, int w, int h, int ho, int wo, int n)
{
	for (long p = 0; p < n; p++)
		for (long oh = 0; oh < ho; oh++) {
			const float *r0 = src + p * h * w + 2 * oh * w, *r1 = r0 + w;
			float *d = dst + (p * ho + oh) * wo;
			for (int s = 0; s < wo; s += 8) {
				int cnt = wo - s < 8 ? wo - s : 8;
				const int *a = (const int *)(r0 + 2 * s), *b = (const int *)(r1 + 2 * s);
				__m256i lo, hi;
				if (cnt == 8) {
					lo = _mm256_max_epi32(KEY_AVX2(_mm256_loadu_si256((const __m256i *)a)), KEY_AVX2(_mm256_loadu_si256((const __m256i *)b)));
					hi = _mm256_max_epi32(KEY_AVX2(_mm256_loadu_si256((const __m256i *)(a + 8))), KEY_AVX2(_mm256_loadu_si256((const __m256i *)(b + 8))));
				} else {
					__m256i mlo = lanes_avx2(2 * cnt), mhi = lanes_avx2(2 * cnt - 8);
					lo = _mm256_max_epi32(KEY_AVX2(_mm256_maskload_epi32(a, mlo)), KEY_AVX2(_mm256_maskload_epi32(b, mlo)));
					hi = _mm256_max_epi32(KEY_AVX2(_mm256_maskload_epi32(a + 8, mhi)), KEY_AVX2(_mm256_maskload_epi32(b + 8, mhi)));
				}
				// [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6], then the 64-bit
				// lanes reordered to lo0 lo2 lo4 lo6 hi0 hi2 hi4 hi6.
				__m256 e = _mm256_shuffle_ps(_mm256_castsi256_ps(lo), _mm256_castsi256_ps(hi), _MM_SHUFFLE(2, 0, 2, 0));
				__m256 o = _mm256_shuffle_ps(_mm256_castsi256_ps(lo), _mm256_castsi256_ps(hi), _MM_SHUFFLE(3, 1, 3, 1));
				__m256i ev = _mm256_permute4x64_epi64(_mm256_castps_si256(e), 0xD8);
				__m256i od = _mm256_permute4x64_epi64(_mm256_castps_si256(o), 0xD8);
				__m256i m = _mm256_max_epi32(ev, od);
				m = _mm256_xor_si256(m, _mm256_srli_epi32(_mm256_srai_epi32(m, 31), 1));
				// A masked store is slow on AMD's cores: a full one, or the
				// tail through a buffer.
				if (cnt == 8) {
					_mm256_storeu_si256((__m256i *)(d + s), m);
				} else {
					float t[8];
					_mm256_storeu_si256((__m256i *)t, m);
					memcpy(d + s, t, 4 * (size_t)cnt);
				}
			}
		}
}

// max2x2_eval_isa is 2 (AVX-512), 1 (AVX2) or 0 (the compiler's loop),
// -2 until the CPU is asked; tests set it to compare the three.
static int max2x2_eval_isa = -2;

// max2x2_eval_use sets the path (-2: the CPU's best) and returns 1 if
// this CPU runs it.
int max2x2_eval_use(int isa)
{
	__builtin_cpu_init();
	if ((isa == 2 && !__builtin_cpu_supports("avx512f")) || (isa == 1 && !__builtin_cpu_supports("avx2")))
		return 0;
	max2x2_eval_isa = isa;
	return 1;
}

void max2x2_planes_eval(const float *src, float *dst, int w, int h, int ho, int wo, int n)
{
	if (max2x2_eval_isa == -2) {
		__builtin_cpu_init();
		max2x2_eval_isa = __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
	}
	switch (max2x2_eval_isa) {
	case 2:
		max2x2_planes_eval_avx512(src, dst, w, h, ho, wo, n);
		return;
	case 1:
		max2x2_planes_eval_avx2(src, dst, w, h, ho, wo, n);
		return;
	}
	max2x2_planes_eval_c(src, dst, w, h, ho, wo, n);
}

// max2x2_planes (training: with each maximum's index) by hand, as the
// evaluation one above: the compiler's loop (max2x2) does not vectorise
// the stride-2 reads and took a tenth of the Fashion CNN's step. For a
// run of outputs of a row pair, the keys of both input rows are split
// into even and odd columns (a, b of the upper row, c, d of the lower),
// then max2x2's choices are made lane by lane with compares and blends:
// b over a and d over c only when greater, then the lower pair over the
// upper only when greater, so ties go to the first maximum as there.
__attribute__((target("avx512f")))
static void max2x2_planes_avx512(const float *src, float *dst, int *ix, int w, int h, int ho, int wo, int n)
{
	const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
	const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
	const __m512i lane2 = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
	const __m512i one = _mm512_set1_epi32(1), vw = _mm512_set1_epi32(w), vw1 = _mm512_set1_epi32(w + 1);
	for (long p = 0; p < n; p++)
		for (long oh = 0; oh < ho; oh++) {
			const float *r0 = src + p * h * w + 2 * oh * w, *r1 = r0 + w;
			float *d = dst + (p * ho + oh) * wo;
			int *id = ix + (p * ho + oh) * wo;
			int base = 2 * (int)oh * w;
			for (int s = 0; s < wo; s += 16) {
				int cnt = wo - s < 16 ? wo - s : 16;
				int in = 2 * cnt;
				__mmask16 mlo = in >= 16 ? 0xffff : (__mmask16)((1u << in) - 1);
				__mmask16 mhi = in <= 16 ? 0 : (__mmask16)((1u << (in - 16)) - 1);
				const float *pa = r0 + 2 * s, *pb = r1 + 2 * s;
				__m512i u0 = KEY_AVX512(_mm512_maskz_loadu_epi32(mlo, pa)), u1 = KEY_AVX512(_mm512_maskz_loadu_epi32(mhi, pa + 16));
				__m512i l0 = KEY_AVX512(_mm512_maskz_loadu_epi32(mlo, pb)), l1 = KEY_AVX512(_mm512_maskz_loadu_epi32(mhi, pb + 16));
				__m512i ka = _mm512_permutex2var_epi32(u0, even, u1), kb = _mm512_permutex2var_epi32(u0, odd, u1);
				__m512i kc = _mm512_permutex2var_epi32(l0, even, l1), kd = _mm512_permutex2var_epi32(l0, odd, l1);
				__mmask16 gb = _mm512_cmpgt_epi32_mask(kb, ka), gd = _mm512_cmpgt_epi32_mask(kd, kc);
				__m512i i0 = _mm512_maskz_mov_epi32(gb, one);
				__m512i i1 = _mm512_mask_mov_epi32(vw, gd, vw1);
				ka = _mm512_mask_mov_epi32(ka, gb, kb);
				kc = _mm512_mask_mov_epi32(kc, gd, kd);
				__mmask16 gc = _mm512_cmpgt_epi32_mask(kc, ka);
				i0 = _mm512_mask_mov_epi32(i0, gc, i1);
				ka = _mm512_mask_mov_epi32(ka, gc, kc);
				ka = _mm512_xor_si512(ka, _mm512_srli_epi32(_mm512_srai_epi32(ka, 31), 1));
				__m512i at = _mm512_add_epi32(_mm512_add_epi32(_mm512_set1_epi32(base + 2 * s), lane2), i0);
				__mmask16 mo = (__mmask16)((1u << cnt) - 1);
				_mm512_mask_storeu_epi32(d + s, mo, ka);
				_mm512_mask_storeu_epi32(id + s, mo, at);
			}
		}
}

__attribute__((target("avx2")))
static void max2x2_planes_avx2(const float *src, float *dst, int *ix, int w, int h, int ho, int wo, int n)
{
	const __m256i lane2 = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
	const __m256i one = _mm256_set1_epi32(1), vw = _mm256_set1_epi32(w), vw1 = _mm256_set1_epi32(w + 1);
	for (long p = 0; p < n; p++)
		for (long oh = 0; oh < ho; oh++) {
			const float *r0 = src + p * h * w + 2 * oh * w, *r1 = r0 + w;
			float *d = dst + (p * ho + oh) * wo;
			int *id = ix + (p * ho + oh) * wo;
			int base = 2 * (int)oh * w;
			for (int s = 0; s < wo; s += 8) {
				int cnt = wo - s < 8 ? wo - s : 8;
				const int *pa = (const int *)(r0 + 2 * s), *pb = (const int *)(r1 + 2 * s);
				__m256i u0, u1, l0, l1;
				if (cnt == 8) {
					u0 = _mm256_loadu_si256((const __m256i *)pa), u1 = _mm256_loadu_si256((const __m256i *)(pa + 8));
					l0 = _mm256_loadu_si256((const __m256i *)pb), l1 = _mm256_loadu_si256((const __m256i *)(pb + 8));
				} else {
					__m256i mlo = lanes_avx2(2 * cnt), mhi = lanes_avx2(2 * cnt - 8);
					u0 = _mm256_maskload_epi32(pa, mlo), u1 = _mm256_maskload_epi32(pa + 8, mhi);
					l0 = _mm256_maskload_epi32(pb, mlo), l1 = _mm256_maskload_epi32(pb + 8, mhi);
				}
				u0 = KEY_AVX2(u0), u1 = KEY_AVX2(u1), l0 = KEY_AVX2(l0), l1 = KEY_AVX2(l1);
				// Even and odd columns, in order (see max2x2_planes_eval_avx2).
				__m256i ka = _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(u0), _mm256_castsi256_ps(u1), _MM_SHUFFLE(2, 0, 2, 0))), 0xD8);
				__m256i kb = _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(u0), _mm256_castsi256_ps(u1), _MM_SHUFFLE(3, 1, 3, 1))), 0xD8);
				__m256i kc = _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(l0), _mm256_castsi256_ps(l1), _MM_SHUFFLE(2, 0, 2, 0))), 0xD8);
				__m256i kd = _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(l0), _mm256_castsi256_ps(l1), _MM_SHUFFLE(3, 1, 3, 1))), 0xD8);
				__m256i gb = _mm256_cmpgt_epi32(kb, ka), gd = _mm256_cmpgt_epi32(kd, kc);
				__m256i i0 = _mm256_and_si256(gb, one);
				__m256i i1 = _mm256_blendv_epi8(vw, vw1, gd);
				ka = _mm256_blendv_epi8(ka, kb, gb);
				kc = _mm256_blendv_epi8(kc, kd, gd);
				__m256i gc = _mm256_cmpgt_epi32(kc, ka);
				i0 = _mm256_blendv_epi8(i0, i1, gc);
				ka = _mm256_blendv_epi8(ka, kc, gc);
				ka = _mm256_xor_si256(ka, _mm256_srli_epi32(_mm256_srai_epi32(ka, 31), 1));
				__m256i at = _mm256_add_epi32(_mm256_add_epi32(_mm256_set1_epi32(base + 2 * s), lane2), i0);
				if (cnt == 8) {
					_mm256_storeu_si256((__m256i *)(d + s), ka);
					_mm256_storeu_si256((__m256i *)(id + s), at);
				} else {
					int t[16];
					_mm256_storeu_si256((__m256i *)t, ka);
					_mm256_storeu_si256((__m256i *)(t + 8), at);
					memcpy(d + s, t, 4 * (size_t)cnt);
					memcpy(id + s, t + 8, 4 * (size_t)cnt);
				}
			}
		}
}

// max2x2_isa is max2x2_eval_isa's twin for max2x2_planes.
static int max2x2_isa = -2;

// max2x2_use sets the path of max2x2_planes (-2: the CPU's best) and
// returns 1 if this CPU runs it.
int max2x2_use(int isa)
{
	__builtin_cpu_init();
	if (isa == -2)
		isa = __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
	if ((isa == 2 && !__builtin_cpu_supports("avx512f")) || (isa == 1 && !__builtin_cpu_supports("avx2")))
		return 0;
	max2x2_isa = isa;
	return 1;
}

void max2x2_planes(const float *src, float *dst, int *ix, int w, int h, int ho, int wo, int n)
{
	if (max2x2_isa == -2)
		max2x2_use(-2);
	switch (max2x2_isa) {
	case 2:
		max2x2_planes_avx512(src, dst, ix, w, h, ho, wo, n);
		return;
	case 1:
		max2x2_planes_avx2(src, dst, ix, w, h, ho, wo, n);
		return;
	}
	max2x2_planes_c(src, dst, ix, w, h, ho, wo, n);
}

// max2x2_planes_eval_c is the loop the compiler vectorises: each chunk
// of row pairs' column maxima (2·wo of them) into t, then the maxima of
// t's adjacent pairs, a single run over the whole chunk.
CLONES
static void max2x2_planes_eval_c(const float *src, float *dst, int w, int h, int ho, int wo, int n)
{
	enum { T = 4096 };
	int32_t t[T];
	long w2 = 2L * wo;
	long per = T / w2;
	long R = (long)n * ho;
	if (per < 1) {
		for (int p = 0; p < n; p++)
			for (int oh = 0; oh < ho; oh++) {
				const float *r0 = src + (long)p * h * w + (long)2 * oh * w, *r1 = r0 + w;
				float *d = dst + ((long)p * ho + oh) * wo;
				for (int ow = 0; ow < wo; ow++) {
					int32_t ka = key(r0[2 * ow]), kb = key(r0[2 * ow + 1]), kc = key(r1[2 * ow]), kd = key(r1[2 * ow + 1]);
					ka = kb > ka ? kb : ka;
					kc = kd > kc ? kd : kc;
					d[ow] = unkey(kc > ka ? kc : ka);
				}
			}
		return;
	}
	for (long q0 = 0; q0 < R; q0 += per) {
		long q1 = q0 + per < R ? q0 + per : R;
		for (long q = q0; q < q1; q++) {
			long p = q / ho, oh = q - p * ho;
			const float *restrict r0 = src + p * h * w + 2 * oh * w;
			const float *restrict r1 = r0 + w;
			int32_t *restrict tt = t + (q - q0) * w2;
			for (long j = 0; j < w2; j++) {
				int32_t a = key(r0[j]), b = key(r1[j]);
				tt[j] = a > b ? a : b;
			}
		}
		float *restrict d = dst + q0 * wo;
		long m = (q1 - q0) * wo;
		for (long k = 0; k < m; k++) {
			int32_t a = t[2 * k], b = t[2 * k + 1];
			d[k] = unkey(a > b ? a : b);
		}
	}
}


// max_of_4_rows is native.maxOf4Rows: rows [0, m) of c (co int32 each, ldc
// apart) become the maxima of rows 4i..4i+3. Row i is written after rows
// 4i..4i+3 are read, and i < 4i for i > 0, so those rows never overlap
// the one written (restrict); row 0 is its own first input.
static inline void max4_row(int32_t *restrict d, const int32_t *restrict r0, const int32_t *restrict r1,
			    const int32_t *restrict r2, const int32_t *restrict r3, int co)
{
	for (int o = 0; o < co; o++) {
		int32_t a = r0[o] > r1[o] ? r0[o] : r1[o], b = r2[o] > r3[o] ? r2[o] : r3[o];
		d[o] = a > b ? a : b;
	}
}

CLONES
void max_of_4_rows(int32_t *c, int m, int co, int ldc)
{
	if (m <= 0)
		return;
	for (int o = 0; o < co; o++) {
		int32_t a = c[o] > c[ldc + o] ? c[o] : c[ldc + o];
		int32_t b = c[2 * (long)ldc + o] > c[3 * (long)ldc + o] ? c[2 * (long)ldc + o] : c[3 * (long)ldc + o];
		c[o] = a > b ? a : b;
	}
	for (long i = 1; i < m; i++) {
		const int32_t *r0 = c + 4 * i * (long)ldc;
		max4_row(c + i * (long)ldc, r0, r0 + ldc, r0 + 2 * (long)ldc, r0 + 3 * (long)ldc, co);
	}
}

// exp32 and erf32 are native's (fastmath.go) in the same operations and
// order: Cephes' expf on a clamped argument (so that the bit trick for
// 2^n stays in range), the out-of-range answers chosen after; and
// Abramowitz and Stegun's 7.1.26. Written with quiet compares and bit
// blends (sel), not branches, so that the loops calling them vectorise.
// sel is c ? a : b as a bit blend: both sides are computed, so GCC does
// not sink either into a branch that trapping math keeps scalar.
static inline float sel(int c, float a, float b)
{
	uint32_t m = 0u - (uint32_t)(c != 0);
	return from((bits(a) & m) | (bits(b) & ~m));
}

static inline float exp32(float x)
{
	const float hi = 88.3762626647949f, lo = -87.3365447504f;
	int big = __builtin_isgreater(x, hi), small = __builtin_isless(x, lo), nan = __builtin_isunordered(x, x);
	float xc = sel(big, hi, sel(small, lo, sel(nan, 0.0f, x)));
	// floor by truncation, exact for |v| ≤ 129 (GCC keeps floorf scalar)
	float v = xc * 1.44269504088896341f + 0.5f, tv = (float)(int32_t)v;
	float n = tv - sel(__builtin_isgreater(tv, v), 1.0f, 0.0f);
	float r = xc - n * 0.693359375f - n * -2.12194440e-4f;
	float p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	float y = p * r * r + r + 1;
	y = y * from((uint32_t)((int32_t)n + 127) << 23);
	return sel(big, (float)INFINITY, sel(small, 0.0f, sel(nan, x, y)));
}

static inline float erf32(float x)
{
	int neg = __builtin_isless(x, 0.0f);
	float s = sel(neg, -1.0f, 1.0f);
	x = sel(neg, -x, x);
	float t = 1 / (1 + 0.3275911f * x);
	float p = 1.061405429f;
	p = p * t - 1.453152027f;
	p = p * t + 1.421413741f;
	p = p * t - 0.284496736f;
	p = p * t + 0.254829592f;
	return s * (1 - p * t * exp32(-x * x));
}

// gelu is native's applyAct for gelu: dst = x/2·(1 + erf(x·c1)), c1 the
// float32 of 1/√2.
CLONES
void gelu(float *dst, const float *src, float c1, long n)
{
	for (long i = 0; i < n; i++) {
		float v = src[i];
		dst[i] = 0.5f * v * (1 + erf32(v * c1));
	}
}

// gelu_grad is native's actBackward for gelu: g ·= (1 + erf(x·c1))/2 +
// x·exp(-x²/2)·c2, c2 the float32 of 1/√(2π).
CLONES
void gelu_grad(float *g, const float *x, float c1, float c2, long n)
{
	for (long i = 0; i < n; i++) {
		float v = x[i];
		g[i] *= 0.5f * (1 + erf32(v * c1)) + v * exp32(-0.5f * v * v) * c2;
	}
}

// exp_sub is native's exp32(x[i] - sub) into dst (dst may be x): the
// exponentials of a softmax row and of a FAVOR+ feature row.
CLONES
void exp_sub(float *dst, const float *x, float sub, long n)
{
	for (long i = 0; i < n; i++)
		dst[i] = exp32(x[i] - sub);
}
