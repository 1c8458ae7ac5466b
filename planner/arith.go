package planner

import (
	"fmt"
	"math/bits"

	"pipe/planner/cost"
)

// Byte and FLOP counts are int64 and saturate at math.MaxInt64 instead of
// wrapping: a model written to break the planner (a 10^12-parameter dense
// layer at batch 10^6) must come out as "does not fit" with a huge number,
// never as a small or negative one.

// sat is the saturation value of every count; the arithmetic is
// package cost's, which the engines' cost models share.
const sat = cost.Sat

func add(a, b int64) int64  { return cost.Add(a, b) }
func sum(xs ...int64) int64 { return cost.Sum(xs...) }
func mul(a, b int64) int64  { return cost.Mul(a, b) }
func sub(a, b int64) int64  { return cost.Sub(a, b) }

// wide is an exact running sum of non-negative counts that may pass
// math.MaxInt64 on the way, for sums that take terms out again: add and sub
// cannot, since a saturated sum has forgotten its terms. sub takes out
// only what add put in, so the sum never falls below zero.
type wide struct{ hi, lo uint64 }

func (w *wide) add(x int64) {
	var c uint64
	w.lo, c = bits.Add64(w.lo, uint64(x), 0)
	w.hi += c
}

func (w *wide) sub(x int64) {
	var b uint64
	w.lo, b = bits.Sub64(w.lo, uint64(x), 0)
	w.hi -= b
}

// int is the sum, saturating at sat.
func (w wide) int() int64 {
	if w.hi != 0 || w.lo >= sat {
		return sat
	}
	return int64(w.lo)
}

// numel is the number of elements of a shape, saturating.
func numel(shape []int64) int64 { return cost.Numel(shape) }

// fraction returns x·f rounded down, for 0 <= f <= 1, without overflow.
func fraction(x int64, f float64) int64 {
	v := float64(x) * f
	if v >= float64(sat) {
		return sat
	}
	return int64(v)
}

// FormatBytes renders a byte count for people (cost.FormatBytes).
func FormatBytes(n int64) string { return cost.FormatBytes(n) }

// FormatCount renders a large count with an SI suffix: 11.7M, 1.0T.
func FormatCount(n int64) string {
	if n == sat {
		return "≥ 9.2E"
	}
	v := float64(n)
	for _, s := range []struct {
		div  float64
		unit string
	}{{1e18, "E"}, {1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if v >= s.div {
			return fmt.Sprintf("%.1f%s", v/s.div, s.unit)
		}
	}
	return fmt.Sprintf("%d", n)
}
