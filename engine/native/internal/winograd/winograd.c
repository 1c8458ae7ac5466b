//go:build cgo

// Winograd F(2x2, 3x3) transforms (see winograd.go), in C so that the
// compiler vectorises the loops over a row of tiles.

#include <string.h>
#include "winograd.h"

#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

// wino_wt writes U[16][co][ci] = G·g·Gᵀ for the weights g[co][ci][3][3],
// output channels [o0, o1).
void wino_wt(const float *g, float *U, int co, int ci, int o0, int o1)
{
	long plane = (long)co * ci;
	float tb[16][WT_BLOCK];
	for (int o = o0; o < o1; o++) {
		for (int i0 = 0; i0 < ci; i0 += WT_BLOCK) {
			int cnt = ci - i0 < WT_BLOCK ? ci - i0 : WT_BLOCK;
			for (int j = 0; j < cnt; j++) {
				const float *k = g + ((long)o * ci + i0 + j) * 9;
				float t[4][3];
				for (int b = 0; b < 3; b++) {
					float g0 = k[b], g1 = k[3 + b], g2 = k[6 + b];
					t[0][b] = g0;
					t[1][b] = 0.5f * (g0 + g1 + g2);
					t[2][b] = 0.5f * (g0 - g1 + g2);
					t[3][b] = g2;
				}
				for (int a = 0; a < 4; a++) {
					float t0 = t[a][0], t1 = t[a][1], t2 = t[a][2];
					tb[a * 4 + 0][j] = t0;
					tb[a * 4 + 1][j] = 0.5f * (t0 + t1 + t2);
					tb[a * 4 + 2][j] = 0.5f * (t0 - t1 + t2);
					tb[a * 4 + 3][j] = t2;
				}
			}
			float *u = U + (long)o * ci + i0;
			for (int x = 0; x < 16; x++)
				memcpy(u + x * plane, tb[x], (size_t)cnt * sizeof(float));
		}
	}
}

// wino_wgrad adds Gᵀ·dU·G, dU[16][co][ci], into dw[co][ci][3][3].
void wino_wgrad(const float *dU, float *dw, int co, int ci)
{
	long plane = (long)co * ci;
	float tb[16][WT_BLOCK];
	for (int o = 0; o < co; o++) {
		for (int i0 = 0; i0 < ci; i0 += WT_BLOCK) {
			int cnt = ci - i0 < WT_BLOCK ? ci - i0 : WT_BLOCK;
			const float *us = dU + (long)o * ci + i0;
			for (int x = 0; x < 16; x++)
				memcpy(tb[x], us + x * plane, (size_t)cnt * sizeof(float));
			for (int j = 0; j < cnt; j++) {
				float r[3][4];
				for (int b = 0; b < 4; b++) {
					float u0 = tb[0 * 4 + b][j], u1 = tb[1 * 4 + b][j];
					float u2 = tb[2 * 4 + b][j], u3 = tb[3 * 4 + b][j];
					r[0][b] = u0 + 0.5f * (u1 + u2);
					r[1][b] = 0.5f * (u1 - u2);
					r[2][b] = 0.5f * (u1 + u2) + u3;
				}
				float *k = dw + ((long)o * ci + i0 + j) * 9;
				for (int a = 0; a < 3; a++) {
					float r0 = r[a][0], r1 = r[a][1], r2 = r[a][2], r3 = r[a][3];
					k[a * 3 + 0] += r0 + 0.5f * (r1 + r2);
					k[a * 3 + 1] += 0.5f * (r1 - r2);
					k[a * 3 + 2] += 0.5f * (r1 + r2) + r3;
				}
			}
		}
	}
}

// input_tiles transforms cnt tiles whose 4 input rows (from column -1
// of the first tile) are r0..r3, into v (ξ stride xs): first Bᵀ·d down
// the columns, in place, then ·B along the rows, each loop a plain one
// the compiler vectorises.
CLONES
static void input_tiles(float *restrict r0, float *restrict r1, float *restrict r2,
			float *restrict r3, float *restrict v, long xs, int cnt)
{
	int nc = 2 * cnt + 2;
	for (int j = 0; j < nc; j++) {
		float d0 = r0[j], d1 = r1[j], d2 = r2[j], d3 = r3[j];
		r0[j] = d0 - d2;
		r1[j] = d1 + d2;
		r2[j] = d2 - d1;
		r3[j] = d1 - d3;
	}
	float *rs[4] = {r0, r1, r2, r3};
	for (int a = 0; a < 4; a++) {
		const float *restrict t = rs[a];
		float *restrict v0 = v + (a * 4 + 0) * xs, *restrict v1 = v + (a * 4 + 1) * xs;
		float *restrict v2 = v + (a * 4 + 2) * xs, *restrict v3 = v + (a * 4 + 3) * xs;
		for (int k = 0; k < cnt; k++) {
			float t0 = t[2 * k], t1 = t[2 * k + 1], t2 = t[2 * k + 2], t3 = t[2 * k + 3];
			v0[k] = t0 - t2;
			v1[k] = t1 + t2;
			v2[k] = t2 - t1;
			v3[k] = t1 - t3;
		}
	}
}

// wino_in writes the input transforms Bᵀ·d·B of tiles [t0, t1) of x
// (ci planes of n images h × w, padding 1) into V[16][ci][ldv], tile t
// at column t - t0. rows holds 4·(w+4) values.
void wino_in(const float *x, float *V, int ci, int n, int h, int w, long t0, long t1, int ldv, float *rows)
{
	int th = (h + 1) / 2, tw = (w + 1) / 2;
	int rw = w + 4;
	long xs = (long)ci * ldv;
	for (long t = t0; t < t1;) {
		struct run r = run_at(t, t1, th, tw);
		int cnt = r.tx1 - r.tx0;
		int cs = 2 * r.tx0 - 1, ce = 2 * r.tx1 + 2; // input columns [cs, ce)
		for (int c = 0; c < ci; c++) {
			const float *plane = x + ((long)c * n + r.nn) * h * w;
			for (int i = 0; i < 4; i++)
				padded_row(rows + i * rw, plane, 2 * r.ty - 1 + i, h, w, cs, ce);
			input_tiles(rows, rows + rw, rows + 2 * rw, rows + 3 * rw, V + (long)c * ldv + (t - t0), xs, cnt);
		}
		t += cnt;
	}
}

CLONES
static void output_tiles(const float *restrict m, long xs, float *restrict o0, float *restrict o1, int cnt)
{
	for (int k = 0; k < cnt; k++) {
		float s[2][4];
		for (int c = 0; c < 4; c++) {
			float m0 = m[(0 * 4 + c) * xs + k], m1 = m[(1 * 4 + c) * xs + k];
			float m2 = m[(2 * 4 + c) * xs + k], m3 = m[(3 * 4 + c) * xs + k];
			s[0][c] = m0 + m1 + m2;
			s[1][c] = m1 - m2 - m3;
		}
		o0[2 * k] = s[0][0] + s[0][1] + s[0][2];
		o0[2 * k + 1] = s[0][1] - s[0][2] - s[0][3];
		o1[2 * k] = s[1][0] + s[1][1] + s[1][2];
		o1[2 * k + 1] = s[1][1] - s[1][2] - s[1][3];
	}
}

// wino_out writes Aᵀ·m·A of tiles [t0, t1), M[16][co][ldm], into y (co
// planes of n images h × w): y = that + beta·y. rows holds 2·(w+4) values.
void wino_out(const float *M, float *y, int co, int n, int h, int w, long t0, long t1, int ldm, float beta, float *rows)
{
	int th = (h + 1) / 2, tw = (w + 1) / 2;
	int rw = w + 4;
	long xs = (long)co * ldm;
	for (long t = t0; t < t1;) {
		struct run r = run_at(t, t1, th, tw);
		int cnt = r.tx1 - r.tx0;
		int c0 = 2 * r.tx0, c1 = 2 * r.tx1;
		if (c1 > w)
			c1 = w;
		for (int o = 0; o < co; o++) {
			output_tiles(M + (long)o * ldm + (t - t0), xs, rows, rows + rw, cnt);
			float *plane = y + ((long)o * n + r.nn) * h * w;
			for (int i = 0; i < 2; i++) {
				int oy = 2 * r.ty + i;
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

// dy_tiles transforms cnt tiles whose 2 rows of dy are r0, r1 into m
// (ξ stride xs): first A·dy down the columns into r0..r3, then ·Aᵀ along
// the rows.
CLONES
static void dy_tiles(float *restrict r0, float *restrict r1, float *restrict r2, float *restrict r3,
		     float *restrict m, long xs, int cnt)
{
	int nc = 2 * cnt;
	for (int j = 0; j < nc; j++) {
		float a = r0[j], c = r1[j];
		r1[j] = a + c;
		r2[j] = a - c;
		r3[j] = -c;
	}
	float *rs[4] = {r0, r1, r2, r3};
	for (int i = 0; i < 4; i++) {
		const float *restrict s = rs[i];
		float *restrict m0 = m + (i * 4 + 0) * xs, *restrict m1 = m + (i * 4 + 1) * xs;
		float *restrict m2 = m + (i * 4 + 2) * xs, *restrict m3 = m + (i * 4 + 3) * xs;
		for (int k = 0; k < cnt; k++) {
			float p = s[2 * k], q = s[2 * k + 1];
			m0[k] = p;
			m1[k] = p + q;
			m2[k] = p - q;
			m3[k] = -q;
		}
	}
}

// wino_dy writes A·dy·Aᵀ of tiles [t0, t1) of dy (co planes of n images
// h × w) into M[16][co][ldm]. rows holds 4·(w+4) values.
void wino_dy(const float *dy, float *M, int co, int n, int h, int w, long t0, long t1, int ldm, float *rows)
{
	int th = (h + 1) / 2, tw = (w + 1) / 2;
	int rw = w + 4;
	long xs = (long)co * ldm;
	for (long t = t0; t < t1;) {
		struct run r = run_at(t, t1, th, tw);
		int cnt = r.tx1 - r.tx0;
		int c0 = 2 * r.tx0, c1 = 2 * r.tx1;
		for (int o = 0; o < co; o++) {
			const float *plane = dy + ((long)o * n + r.nn) * h * w;
			for (int i = 0; i < 2; i++)
				padded_row(rows + i * rw, plane, 2 * r.ty + i, h, w, c0, c1);
			dy_tiles(rows, rows + rw, rows + 2 * rw, rows + 3 * rw, M + (long)o * ldm + (t - t0), xs, cnt);
		}
		t += cnt;
	}
}
