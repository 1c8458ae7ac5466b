package native

import (
	"math"
	"testing"
)

// TestFastMath holds exp32 and erf32 to float64's values over the ranges
// softmax and gelu meet.
func TestFastMath(t *testing.T) {
	var worstExp, worstErf float64
	for x := -87.0; x <= 88; x += 0.0137 {
		want := math.Exp(x)
		got := float64(exp32(float32(x)))
		// The input's own rounding to float32 moves exp by |x|·2^-24.
		tol := 3e-7 + math.Abs(x)*6e-8
		if rel := math.Abs(got-want) / want; rel > tol {
			t.Fatalf("exp32(%g) = %g, want %g (relative %.2g)", x, got, want, rel)
		} else if math.Abs(x) < 1 {
			worstExp = math.Max(worstExp, rel)
		}
	}
	for x := -6.0; x <= 6; x += 0.001 {
		want := math.Erf(float64(float32(x)))
		got := float64(erf32(float32(x)))
		if d := math.Abs(got - want); d > 5e-7 {
			t.Fatalf("erf32(%g) = %g, want %g", x, got, want)
		} else {
			worstErf = math.Max(worstErf, d)
		}
	}
	if exp32(-100) != 0 || !math.IsInf(float64(exp32(100)), 1) || exp32(0) != 1 {
		t.Errorf("exp32 at the ends: %g %g %g", exp32(-100), exp32(100), exp32(0))
	}
	t.Logf("exp32 worst relative error on (-1, 1) %.2g; erf32 worst absolute error %.2g", worstExp, worstErf)
}
