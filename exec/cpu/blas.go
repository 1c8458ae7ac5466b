package cpu

import (
	netlib "gonum.org/v1/netlib/blas/netlib"
)

// blasImpl is OpenBLAS through gonum's cgo binding.
var blasImpl netlib.Implementation
