void max2x2(const float *src, float *dst, int *ix, int w, int ho, int wo);
