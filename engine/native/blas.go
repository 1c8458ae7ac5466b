//go:build cgo

package native

import (
	netlib "gonum.org/v1/netlib/blas/netlib"
	G "gorgonia.org/gorgonia"

	"pipe/engine/native/internal/openblas"
)

// blasImpl is OpenBLAS through gonum's cgo binding.
var blasImpl netlib.Implementation

// setupBLAS settles OpenBLAS's kernels for this CPU (openblas.Choose),
// routes gorgonia's and gorgonia/tensor's BLAS to OpenBLAS and turns
// OpenBLAS's own threads off: the backend's workers split every product
// themselves (see conv.go), and OpenBLAS threads spinning next to them
// would only compete for the same cores.
func setupBLAS() {
	openblas.Choose()
	G.Use(netlib.Implementation{})
	openblas.SetThreads(1)
}

// blasThreadsSettable says blasThreads can set BLAS's own threads.
const blasThreadsSettable = true

// blasThreads sets OpenBLAS's threads to n and returns the function that
// turns them off again, as setupBLAS leaves them.
func blasThreads(n int) (restore func()) {
	openblas.SetThreads(n)
	return func() { openblas.SetThreads(1) }
}

// BLASKernels names the BLAS, the kernels it runs on this CPU and their
// vector extension, and who chose them (openblas.Choose: the library, a
// user's OPENBLAS_CORETYPE, or pipe over the library's fallback), for
// the plan, the report, pipe devices and benchmark tables. The first
// call settles the kernels.
func BLASKernels() string { return openblas.Choose().String() }
