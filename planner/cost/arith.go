package cost

import "math"

// Sat is where the saturating arithmetic stops: a size that large means
// "more than any machine has", and stays so through sums and products.
const Sat = math.MaxInt64

// Add is a + b, saturating at Sat.
func Add(a, b int64) int64 {
	if a > Sat-b {
		return Sat
	}
	return a + b
}

// Sum adds xs, saturating at Sat.
func Sum(xs ...int64) int64 {
	var s int64
	for _, x := range xs {
		s = Add(s, x)
	}
	return s
}

// Mul is a × b for sizes (non-negative), saturating at Sat.
func Mul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > Sat/b {
		return Sat
	}
	return a * b
}

// Sub is a - b, 0 when b ≥ a; a saturated a stays saturated.
func Sub(a, b int64) int64 {
	if a == Sat {
		return Sat
	}
	if b >= a {
		return 0
	}
	return a - b
}

// Numel is the number of values of a shape, saturating at Sat.
func Numel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n = Mul(n, d)
	}
	return n
}
