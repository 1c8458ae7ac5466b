// Package openblas holds the OpenBLAS calls gonum's netlib binding does
// not expose. It is apart from package cpu because a package with cgo
// cannot also hold Go assembly.
package openblas

/*
#cgo LDFLAGS: -lopenblas
void openblas_set_num_threads(int);
int openblas_get_num_threads(void);
char* openblas_get_corename(void);
char* openblas_get_config(void);
*/
import "C"

// SetThreads sets the number of threads OpenBLAS uses for one call.
func SetThreads(n int) { C.openblas_set_num_threads(C.int(n)) }

// Threads returns the number of threads OpenBLAS uses for one call.
func Threads() int { return int(C.openblas_get_num_threads()) }

// CoreName is the kernel family OpenBLAS chose for this CPU.
func CoreName() string { return C.GoString(C.openblas_get_corename()) }

// Config is OpenBLAS's build configuration.
func Config() string { return C.GoString(C.openblas_get_config()) }
