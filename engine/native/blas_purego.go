//go:build !cgo

package native

import (
	"gonum.org/v1/gonum/blas/gonum"
)

// blasImpl is gonum's pure-Go BLAS in a pipe built without cgo (a binary
// for a machine without OpenBLAS, such as a GPU node that trains with the
// torch engine): the same results, about 8 times slower than OpenBLAS.
var blasImpl gonum.Implementation

func setupBLAS() {}

// blasThreadsSettable says blasThreads can set BLAS's own threads: gonum's
// has none.
const blasThreadsSettable = false

func blasThreads(n int) (restore func()) { return func() {} }

// BLASKernels names the BLAS: gonum's Go loops.
func BLASKernels() string { return "gonum (pure Go)" }
