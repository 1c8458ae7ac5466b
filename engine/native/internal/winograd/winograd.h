// Winograd F(2x2, 3x3) and F(4x4, 3x3) transforms: see winograd.go.

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

// F(2x2, 3x3): winograd.c.
void wino_wt(const float *g, float *U, int co, int ci);
void wino_wgrad(const float *dU, float *dw, int co, int ci);
void wino_in(const float *x, float *V, int ci, int n, int h, int w, long t0, long t1, int ldv, float *rows);
void wino_out(const float *M, float *y, int co, int n, int h, int w, long t0, long t1, int ldm, float beta, float *rows);
void wino_dy(const float *dy, float *M, int co, int n, int h, int w, long t0, long t1, int ldm, float *rows);

// F(4x4, 3x3): winograd4.c.
void wino4_wt(const float *g, float *U, int co, int ci);
void wino4_wgrad(const float *dU, float *dw, int co, int ci);
void wino4_in(const float *x, float *V, int ci, int n, int h, int w, long t0, long t1, int ldv, float *rows);
void wino4_out(const float *M, float *y, int co, int n, int h, int w, long t0, long t1, int ldm, float beta, float *rows);
void wino4_dy(const float *dy, float *M, int co, int n, int h, int w, long t0, long t1, int ldm, float *rows);
