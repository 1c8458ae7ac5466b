#include <stdint.h>
void max2x2(const float *src, float *dst, int *ix, int w, int ho, int wo);
void max2x2_planes(const float *src, float *dst, int *ix, int w, int h, int ho, int wo, int n);
void affine_relu(float *dst, const float *src, float a, float b, long n);
void bn_dx(float *dx, const float *g, const float *x, const float *out, float mean, float k, float fn, float sg, float xk, int relu, int acc, long n);
double sum64(const float *x, long n);
double sum_sq_dev(const float *x, float m, long n);
void sum_centered(const float *g, const float *x, const float *out, float mean, int relu, long n, double *sg, double *sgx);
void quant_u8(uint8_t *dst, const float *src, float inv, int lo, int hi, int zero, long n);
void quant_nhwc(uint8_t *xq, const float *x, long pix, int ci, long p0, long p1, float inv, int lo, int hi, int zero);
void requant_t(float *y, long P, const int32_t *c, long cop, long rows, long co, const float *mul, const float *bias, const int32_t *corr, int relu);
void requant_row(float *dst, const int32_t *c, const float *mul, const float *bias, const int32_t *corr, int relu, long n);
void max2x2_planes_eval(const float *src, float *dst, int w, int h, int ho, int wo, int n);
int max2x2_eval_use(int isa);
int max2x2_use(int isa);
void max_of_4_rows(int32_t *c, int m, int co, int ldc);
void gelu(float *dst, const float *src, float c1, long n);
void gelu_grad(float *g, const float *x, float c1, float c2, long n);
void exp_sub(float *dst, const float *x, float sub, long n);
