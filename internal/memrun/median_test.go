package memrun

import (
	"math"
	"testing"
)

func TestMedian(t *testing.T) {
	v := []float64{3, 1, 2}
	if m := Median(v); m != 2 {
		t.Errorf("median of 3 1 2: %v", m)
	}
	if v[0] != 3 || v[1] != 1 {
		t.Errorf("Median sorted its argument: %v", v)
	}
	if m := Median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of 4 1 3 2: %v", m)
	}
	if m := Median(nil); !math.IsNaN(m) {
		t.Errorf("median of nothing: %v", m)
	}
}
