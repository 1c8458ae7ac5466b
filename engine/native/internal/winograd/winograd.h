// Winograd F(2x2, 3x3) and F(4x4, 3x3) transforms: see winograd.go.

#include <string.h>

// run is a stretch of tiles [tx0, tx1) of tile row ty of image nn.
struct run {
	long nn;
	int ty, tx0, tx1;
};

static inline struct run run_at(long t, long t1, int th, int tw)
{
	struct run r;
	long tpi = (long)th * tw;
	r.nn = t / tpi;
	long q = t - r.nn * tpi;
	r.ty = (int)(q / tw);
	r.tx0 = (int)(q - (long)r.ty * tw);
	r.tx1 = tw;
	if (t + (r.tx1 - r.tx0) > t1)
		r.tx1 = r.tx0 + (int)(t1 - t);
	return r;
}

// padded_row writes columns [cs, ce) of row iy of an h × w plane into
// rb, zero where they fall outside it (the convolution's padding, or
// the last tile's columns past the image).
static inline void padded_row(float *rb, const float *plane, int iy, int h, int w, int cs, int ce)
{
	if (iy < 0 || iy >= h) {
		memset(rb, 0, (size_t)(ce - cs) * sizeof(float));
		return;
	}
	int a = cs < 0 ? 0 : cs, b = ce > w ? w : ce;
	for (int j = cs; j < a; j++)
		rb[j - cs] = 0;
	memcpy(rb + (a - cs), plane + (long)iy * w + a, (size_t)(b - a) * sizeof(float));
	for (int j = b; j < ce; j++)
		rb[j - cs] = 0;
}

// WT_BLOCK is the input channels a weight transform takes at a time.
// U's planes lie co·ci values apart, often a multiple of 4 KiB, so they
// share cache sets: storing (or loading) one value in each of 16 or 36
// planes in turn evicted each line before it was full (16 times over).
// The transforms instead go through a block of WT_BLOCK channels in a
// buffer and copy each plane's piece of the row whole.
#define WT_BLOCK 64

// F(2x2, 3x3): winograd.c.
void wino_wt(const float *g, float *U, int co, int ci, int o0, int o1);
void wino_wgrad(const float *dU, float *dw, int co, int ci);
void wino_in(const float *x, float *V, int ci, int n, int h, int w, long t0, long t1, int ldv, float *rows);
void wino_out(const float *M, float *y, int co, int n, int h, int w, long t0, long t1, int ldm, float beta, float *rows);
void wino_dy(const float *dy, float *M, int co, int n, int h, int w, long t0, long t1, int ldm, float *rows);

// F(4x4, 3x3): winograd4.c.
void wino4_wt(const float *g, float *U, int co, int ci, int o0, int o1);
void wino4_wgrad(const float *dU, float *dw, int co, int ci);
void wino4_in(const float *x, float *V, int ci, int n, int h, int w, long t0, long t1, int ldv, float *rows);
void wino4_out(const float *M, float *y, int co, int n, int h, int w, long t0, long t1, int ldm, float beta, float *rows);
void wino4_dy(const float *dy, float *M, int co, int n, int h, int w, long t0, long t1, int ldm, float *rows);
