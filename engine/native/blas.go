//go:build cgo

package native

import (
	"os"

	netlib "gonum.org/v1/netlib/blas/netlib"
	G "gorgonia.org/gorgonia"

	"pipe/engine/native/internal/openblas"
)

// blasImpl is OpenBLAS through gonum's cgo binding.
var blasImpl netlib.Implementation

// setupBLAS routes gorgonia's and gorgonia/tensor's BLAS to OpenBLAS and
// turns OpenBLAS's own threads off: the backend's workers split every
// product themselves (see conv.go), and OpenBLAS threads spinning next to
// them would only compete for the same cores.
func setupBLAS() {
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

// BLASKernels names the BLAS and the kernel family it runs on this CPU,
// for benchmark tables: OpenBLAS picks it from the CPU unless
// OPENBLAS_CORETYPE chooses (some machines set Haswell's AVX2 kernels
// for every CPU, half the speed of the AVX-512 ones where those run).
func BLASKernels() string {
	s := "OpenBLAS, " + openblas.CoreName() + " kernels"
	if v := os.Getenv("OPENBLAS_CORETYPE"); v != "" {
		s += " (OPENBLAS_CORETYPE=" + v + ")"
	}
	return s
}
