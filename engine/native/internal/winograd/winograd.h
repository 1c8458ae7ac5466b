// Winograd F(2x2, 3x3) transforms: see winograd.go.
void wino_wt(const float *g, float *U, int co, int ci);
void wino_wgrad(const float *dU, float *dw, int co, int ci);
void wino_in(const float *x, float *V, int ci, int n, int h, int w, long t0, long t1, int ldv, float *rows);
void wino_out(const float *M, float *y, int co, int n, int h, int w, long t0, long t1, int ldm, float beta, float *rows);
void wino_dy(const float *dy, float *M, int co, int n, int h, int w, long t0, long t1, int ldm, float *rows);
