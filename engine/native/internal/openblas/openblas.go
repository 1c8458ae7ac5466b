// Package openblas holds the OpenBLAS calls gonum's netlib binding does
// not expose, and the choice of the kernels OpenBLAS runs (core.go). It
// is apart from package native because a package with cgo cannot also hold
// Go assembly.
package openblas

/*
#cgo LDFLAGS: -lopenblas -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

void openblas_set_num_threads(int);
int openblas_get_num_threads(void);
char* openblas_get_corename(void);
char* openblas_get_config(void);
void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
	const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);

// pipe_openblas_use_core makes a DYNAMIC_ARCH OpenBLAS run the kernels of
// core (a name OPENBLAS_CORETYPE takes) from now on: the library reads
// that variable in gotoblas_dynamic_init, which runs again once
// gotoblas_dynamic_quit has cleared its choice. The variable is put back
// as it was. It returns 0 where the library has no such functions (a
// build for one core).
static int pipe_openblas_use_core(const char *core) {
	void (*quit)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit");
	void (*init)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init");
	if (!quit || !init) return 0;
	char *old = getenv("OPENBLAS_CORETYPE");
	char *saved = old ? strdup(old) : NULL;
	setenv("OPENBLAS_CORETYPE", core, 1);
	quit();
	init();
	if (saved) { setenv("OPENBLAS_CORETYPE", saved, 1); free(saved); }
	else unsetenv("OPENBLAS_CORETYPE");
	return 1;
}
*/
import "C"

import "unsafe"

// SetThreads sets the number of threads OpenBLAS uses for one call.
func SetThreads(n int) { C.openblas_set_num_threads(C.int(n)) }

// Threads returns the number of threads OpenBLAS uses for one call.
func Threads() int { return int(C.openblas_get_num_threads()) }

// CoreName is the kernel family OpenBLAS runs now.
func CoreName() string { return C.GoString(C.openblas_get_corename()) }

// Config is OpenBLAS's build configuration.
func Config() string { return C.GoString(C.openblas_get_config()) }

// useCore switches the kernels to core's in this process and says
// whether the library could (see pipe_openblas_use_core). No product may
// run meanwhile.
func useCore(core string) bool {
	cs := C.CString(core)
	defer C.free(unsafe.Pointer(cs))
	return C.pipe_openblas_use_core(cs) == 1
}

// sgemm is C = A·B for row-major m×k A, k×n B and m×n C, on the
// library's kernels.
func sgemm(m, n, k int, a, b, c []float32) {
	const rowMajor, noTrans = 101, 111
	C.cblas_sgemm(rowMajor, noTrans, noTrans, C.int(m), C.int(n), C.int(k), 1,
		(*C.float)(&a[0]), C.int(k), (*C.float)(&b[0]), C.int(n), 0, (*C.float)(&c[0]), C.int(n))
}
