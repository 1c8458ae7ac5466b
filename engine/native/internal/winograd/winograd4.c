//go:build cgo

// Winograd F(4x4, 3x3) transforms (see winograd.go), with the points
// 0, 1, -1, 2, -1/2, ∞: 6×6 input tiles, 4×4 output tiles. The matrices
// and the why of the points are in docs/design/native-winograd.md. The
// tile transforms multiply by powers of two, exact, and by 3/2, which
// rounds like the sum it stands for; the weight transforms by 1/3 and
// 1/15. The package builds in ISO C mode, where GCC fuses no product
// into a sum, so the rounding is the same on every target clone (the
// tests compare bits).

#include <string.h>
#include "winograd.h"

#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

static const float third = 1.0f / 3, fifteenth = 1.0f / 15;

// g6 is G·g for one column of three. G's rows: (1, 0, 0), -(1, 1, 1)/3,
// (1, -1, 1)/3, (1, 2, 4)/15, -(4, -2, 1)/15, (0, 0, 1).
static inline void g6(float g0, float g1, float g2, float *t)
{
	float s = g0 + g2;
	t[0] = g0;
	t[1] = -((s + g1) * third);
	t[2] = (s - g1) * third;
	t[3] = ((g0 + 2 * g1) + 4 * g2) * fifteenth;
	t[4] = -(((4 * g0 - 2 * g1) + g2) * fifteenth);
	t[5] = g2;
}

// wino4_wt writes U[36][co][ci] = G·g·Gᵀ for the weights g[co][ci][3][3],
// output channels [o0, o1).
void wino4_wt(const float *g, float *U, int co, int ci, int o0, int o1)
{
	long plane = (long)co * ci;
	float tb[36][WT_BLOCK];
	for (int o = o0; o < o1; o++) {
		for (int i0 = 0; i0 < ci; i0 += WT_BLOCK) {
			int cnt = ci - i0 < WT_BLOCK ? ci - i0 : WT_BLOCK;
			for (int j = 0; j < cnt; j++) {
				const float *k = g + ((long)o * ci + i0 + j) * 9;
				float c[3][6], t[6];
				for (int b = 0; b < 3; b++)
					g6(k[b], k[3 + b], k[6 + b], c[b]); // c[b][a]: row a of G·g, column b
				for (int a = 0; a < 6; a++) {
					g6(c[0][a], c[1][a], c[2][a], t);
					for (int b = 0; b < 6; b++)
						tb[a * 6 + b][j] = t[b];
				}
			}
			float *u = U + (long)o * ci + i0;
			for (int x = 0; x < 36; x++)
				memcpy(u + x * plane, tb[x], (size_t)cnt * sizeof(float));
		}
	}
}

// gt6 is Gᵀ·u for one column of six.
static inline void gt6(float u0, float u1, float u2, float u3, float u4, float u5, float *r0, float *r1, float *r2)
{
	float o = (u2 - u1) * third;
	*r0 = (u0 + o) + (u3 - 4 * u4) * fifteenth;
	*r1 = (2 * (u3 + u4)) * fifteenth - (u1 + u2) * third;
	*r2 = (u5 + o) + (4 * u3 - u4) * fifteenth;
}

// wino4_wgrad adds Gᵀ·dU·G, dU[36][co][ci], into dw[co][ci][3][3].
void wino4_wgrad(const float *dU, float *dw, int co, int ci)
{
	long plane = (long)co * ci;
	float tb[36][WT_BLOCK];
	for (int o = 0; o < co; o++) {
		for (int i0 = 0; i0 < ci; i0 += WT_BLOCK) {
			int cnt = ci - i0 < WT_BLOCK ? ci - i0 : WT_BLOCK;
			const float *us = dU + (long)o * ci + i0;
			for (int x = 0; x < 36; x++)
				memcpy(tb[x], us + x * plane, (size_t)cnt * sizeof(float));
			for (int j = 0; j < cnt; j++) {
				float r[3][6];
				for (int b = 0; b < 6; b++)
					gt6(tb[0 * 6 + b][j], tb[1 * 6 + b][j], tb[2 * 6 + b][j],
					    tb[3 * 6 + b][j], tb[4 * 6 + b][j], tb[5 * 6 + b][j],
					    &r[0][b], &r[1][b], &r[2][b]);
				float *k = dw + ((long)o * ci + i0 + j) * 9;
				for (int a = 0; a < 3; a++) {
					float c0, c1, c2;
					gt6(r[a][0], r[a][1], r[a][2], r[a][3], r[a][4], r[a][5], &c0, &c1, &c2);
					k[a * 3 + 0] += c0;
					k[a * 3 + 1] += c1;
					k[a * 3 + 2] += c2;
				}
			}
		}
	}
}

// input_tiles4 transforms cnt tiles whose 6 input rows (from column -1
// of the first tile) are r[0..5], into v (ξ stride xs): first Bᵀ·d down
// the columns, in place, then ·B along the rows. With a = d4-d2 and
// b = d3-d1, Bᵀ's rows: (d0-d2) + (a - 3b/2), (a - 3d3/2) ± (b - 3d2/2),
// a + b/2, a - 2b, (d5-d3) - (b + 3a/2).
CLONES
static void input_tiles4(float *restrict r0, float *restrict r1, float *restrict r2, float *restrict r3,
			 float *restrict r4, float *restrict r5, float *restrict v, long xs, int cnt)
{
	int nc = 4 * cnt + 2;
	for (int j = 0; j < nc; j++) {
		float d0 = r0[j], d1 = r1[j], d2 = r2[j], d3 = r3[j], d4 = r4[j], d5 = r5[j];
		float a = d4 - d2, b = d3 - d1, h3 = a - 1.5f * d3, h2 = b - 1.5f * d2;
		r0[j] = (d0 - d2) + (a - 1.5f * b);
		r1[j] = h3 + h2;
		r2[j] = h3 - h2;
		r3[j] = a + 0.5f * b;
		r4[j] = a - 2 * b;
		r5[j] = (d5 - d3) - (b + 1.5f * a);
	}
	float *rs[6] = {r0, r1, r2, r3, r4, r5};
	for (int a = 0; a < 6; a++) {
		const float *restrict t = rs[a];
		float *restrict v0 = v + (a * 6 + 0) * xs, *restrict v1 = v + (a * 6 + 1) * xs;
		float *restrict v2 = v + (a * 6 + 2) * xs, *restrict v3 = v + (a * 6 + 3) * xs;
		float *restrict v4 = v + (a * 6 + 4) * xs, *restrict v5 = v + (a * 6 + 5) * xs;
#pragma GCC ivdep
		for (int k = 0; k < cnt; k++) {
			float d0 = t[4 * k], d1 = t[4 * k + 1], d2 = t[4 * k + 2];
			float d3 = t[4 * k + 3], d4 = t[4 * k + 4], d5 = t[4 * k + 5];
			float a = d4 - d2, b = d3 - d1, h3 = a - 1.5f * d3, h2 = b - 1.5f * d2;
			v0[k] = (d0 - d2) + (a - 1.5f * b);
			v1[k] = h3 + h2;
			v2[k] = h3 - h2;
			v3[k] = a + 0.5f * b;
			v4[k] = a - 2 * b;
			v5[k] = (d5 - d3) - (b + 1.5f * a);
		}
	}
}

// wino4_in writes the input transforms Bᵀ·d·B of tiles [t0, t1) of x
// (ci planes of n images h × w, padding 1) into V[36][ci][ldv], tile t
// at column t - t0. rows holds 6·(w+6) values.
void wino4_in(const float *x, float *V, int ci, int n, int h, int w, long t0, long t1, int ldv, float *rows)
{
	int th = (h + 3) / 4, tw = (w + 3) / 4;
	int rw = w + 6;
	long xs = (long)ci * ldv;
	for (long t = t0; t < t1;) {
		struct run r = run_at(t, t1, th, tw);
		int cnt = r.tx1 - r.tx0;
		int cs = 4 * r.tx0 - 1, ce = 4 * r.tx1 + 1; // input columns [cs, ce)
		for (int c = 0; c < ci; c++) {
			const float *plane = x + ((long)c * n + r.nn) * h * w;
			for (int i = 0; i < 6; i++)
				padded_row(rows + i * rw, plane, 4 * r.ty - 1 + i, h, w, cs, ce);
			input_tiles4(rows, rows + rw, rows + 2 * rw, rows + 3 * rw, rows + 4 * rw, rows + 5 * rw,
				     V + (long)c * ldv + (t - t0), xs, cnt);
		}
		t += cnt;
	}
}

// output_tiles4 writes Aᵀ·m·A of cnt tiles (ξ stride xs) into the rows
// o[0..3]. With e = m1+m2 and d = m1-m2, Aᵀ's rows: (m0 + e) + (m3 + 4m4),
// d + 2(m3 - m4), e + (4m3 + m4), (d + 8m3) + (m5 - m4/2).
CLONES
static void output_tiles4(const float *restrict m, long xs, float *restrict o0, float *restrict o1,
			  float *restrict o2, float *restrict o3, int cnt)
{
#pragma GCC ivdep
	for (int k = 0; k < cnt; k++) {
		float s[4][6];
		for (int c = 0; c < 6; c++) {
			float m0 = m[(0 * 6 + c) * xs + k], m1 = m[(1 * 6 + c) * xs + k];
			float m2 = m[(2 * 6 + c) * xs + k], m3 = m[(3 * 6 + c) * xs + k];
			float m4 = m[(4 * 6 + c) * xs + k], m5 = m[(5 * 6 + c) * xs + k];
			float e = m1 + m2, d = m1 - m2;
			s[0][c] = (m0 + e) + (m3 + 4 * m4);
			s[1][c] = d + 2 * (m3 - m4);
			s[2][c] = e + (4 * m3 + m4);
			s[3][c] = (d + 8 * m3) + (m5 - 0.5f * m4);
		}
		float *o[4] = {o0, o1, o2, o3};
		for (int i = 0; i < 4; i++) {
			float m0 = s[i][0], m1 = s[i][1], m2 = s[i][2], m3 = s[i][3], m4 = s[i][4], m5 = s[i][5];
			float e = m1 + m2, d = m1 - m2;
			o[i][4 * k + 0] = (m0 + e) + (m3 + 4 * m4);
			o[i][4 * k + 1] = d + 2 * (m3 - m4);
			o[i][4 * k + 2] = e + (4 * m3 + m4);
			o[i][4 * k + 3] = (d + 8 * m3) + (m5 - 0.5f * m4);
		}
	}
}

// wino4_out writes Aᵀ·m·A of tiles [t0, t1), M[36][co][ldm], into y (co
// planes of n images h × w): y = that + beta·y. rows holds 4·(w+6) values.
void wino4_out(const float *M, float *y, int co, int n, int h, int w, long t0, long t1, int ldm, float beta, float *rows)
{
	int th = (h + 3) / 4, tw = (w + 3) / 4;
	int rw = w + 6;
	long xs = (long)co * ldm;
	for (long t = t0; t < t1;) {
		struct run r = run_at(t, t1, th, tw);
		int cnt = r.tx1 - r.tx0;
		int c0 = 4 * r.tx0, c1 = 4 * r.tx1;
		if (c1 > w)
			c1 = w;
		for (int o = 0; o < co; o++) {
			output_tiles4(M + (long)o * ldm + (t - t0), xs, rows, rows + rw, rows + 2 * rw, rows + 3 * rw, cnt);
			float *plane = y + ((long)o * n + r.nn) * h * w;
			for (int i = 0; i < 4; i++) {
				int oy = 4 * r.ty + i;
				if (oy >= h)
					break;
				float *dst = plane + (long)oy * w + c0;
				const float *src = rows + i * rw;
				if (beta == 0) {
					memcpy(dst, src, (size_t)(c1 - c0) * sizeof(float));
				} else {
					for (int j = 0; j < c1 - c0; j++)
						dst[j] = src[j] + beta * dst[j];
				}
			}
		}
		t += cnt;
	}
}

// dy_tiles4 transforms cnt tiles whose 4 rows of dy are r[0..3] into m
// (ξ stride xs): first A·dy down the columns into r[0..5], then ·Aᵀ
// along the rows. A's rows: p0, (p0+p2) ± (p1+p3), (p0 + 4p2) + 2(p1 + 4p3),
// (4p0 + p2) - (2p1 + p3/2), p3.
CLONES
static void dy_tiles4(float *restrict r0, float *restrict r1, float *restrict r2, float *restrict r3,
		      float *restrict r4, float *restrict r5, float *restrict m, long xs, int cnt)
{
	int nc = 4 * cnt;
	for (int j = 0; j < nc; j++) {
		float p0 = r0[j], p1 = r1[j], p2 = r2[j], p3 = r3[j];
		float e = p0 + p2, o = p1 + p3;
		r1[j] = e + o;
		r2[j] = e - o;
		r3[j] = (p0 + 4 * p2) + 2 * (p1 + 4 * p3);
		r4[j] = (4 * p0 + p2) - (2 * p1 + 0.5f * p3);
		r5[j] = p3;
	}
	float *rs[6] = {r0, r1, r2, r3, r4, r5};
	for (int i = 0; i < 6; i++) {
		const float *restrict s = rs[i];
		float *restrict m0 = m + (i * 6 + 0) * xs, *restrict m1 = m + (i * 6 + 1) * xs;
		float *restrict m2 = m + (i * 6 + 2) * xs, *restrict m3 = m + (i * 6 + 3) * xs;
		float *restrict m4 = m + (i * 6 + 4) * xs, *restrict m5 = m + (i * 6 + 5) * xs;
#pragma GCC ivdep
		for (int k = 0; k < cnt; k++) {
			float p0 = s[4 * k], p1 = s[4 * k + 1], p2 = s[4 * k + 2], p3 = s[4 * k + 3];
			float e = p0 + p2, o = p1 + p3;
			m0[k] = p0;
			m1[k] = e + o;
			m2[k] = e - o;
			m3[k] = (p0 + 4 * p2) + 2 * (p1 + 4 * p3);
			m4[k] = (4 * p0 + p2) - (2 * p1 + 0.5f * p3);
			m5[k] = p3;
		}
	}
}

// wino4_dy writes A·dy·Aᵀ of tiles [t0, t1) of dy (co planes of n images
// h × w) into M[36][co][ldm]. rows holds 6·(w+6) values.
void wino4_dy(const float *dy, float *M, int co, int n, int h, int w, long t0, long t1, int ldm, float *rows)
{
	int th = (h + 3) / 4, tw = (w + 3) / 4;
	int rw = w + 6;
	long xs = (long)co * ldm;
	for (long t = t0; t < t1;) {
		struct run r = run_at(t, t1, th, tw);
		int cnt = r.tx1 - r.tx0;
		int c0 = 4 * r.tx0, c1 = 4 * r.tx1;
		for (int o = 0; o < co; o++) {
			const float *plane = dy + ((long)o * n + r.nn) * h * w;
			for (int i = 0; i < 4; i++)
				padded_row(rows + i * rw, plane, 4 * r.ty + i, h, w, c0, c1);
			dy_tiles4(rows, rows + rw, rows + 2 * rw, rows + 3 * rw, rows + 4 * rw, rows + 5 * rw,
				  M + (long)o * ldm + (t - t0), xs, cnt);
		}
		t += cnt;
	}
}
