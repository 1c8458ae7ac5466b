package stdlib

import "math"

// Costs are int64 and every product that could overflow goes through the
// checked helpers below: a 10^12-parameter dense layer is 2·10^12 FLOPs per
// sample and fits, but a model written to break the planner must not wrap
// around to a small or negative count.

// mulChecked returns a·b and whether it fits in int64. Both operands are
// expected to be non-negative.
func mulChecked(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	if a < 0 || b < 0 {
		return 0, false
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64, false
	}
	return a * b, true
}

// addChecked returns a+b and whether it fits in int64, for non-negative
// operands.
func addChecked(a, b int64) (int64, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	if a > math.MaxInt64-b {
		return math.MaxInt64, false
	}
	return a + b, true
}

// mulSat multiplies non-negative numbers, saturating at math.MaxInt64.
func mulSat(a, b int64) int64 {
	v, _ := mulChecked(a, b)
	return v
}

// addSat adds non-negative numbers, saturating at math.MaxInt64.
func addSat(a, b int64) int64 {
	v, _ := addChecked(a, b)
	return v
}

// numel returns the number of elements of a shape, saturating.
func numel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n = mulSat(n, d)
	}
	return n
}

// calc accumulates products and sums and remembers whether any of them
// overflowed, so a rule can compute its costs in straight lines and check
// once at the end.
type calc struct{ overflow bool }

// mul multiplies its arguments.
func (c *calc) mul(xs ...int64) int64 {
	v := int64(1)
	for _, x := range xs {
		var ok bool
		v, ok = mulChecked(v, x)
		if !ok {
			c.overflow = true
			return math.MaxInt64
		}
	}
	return v
}

// add sums its arguments.
func (c *calc) add(xs ...int64) int64 {
	var v int64
	for _, x := range xs {
		var ok bool
		v, ok = addChecked(v, x)
		if !ok {
			c.overflow = true
			return math.MaxInt64
		}
	}
	return v
}

// numel is the checked element count of a shape.
func (c *calc) numel(shape []int64) int64 { return c.mul(shape...) }
