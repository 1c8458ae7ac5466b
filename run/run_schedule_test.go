package run

import (
	"math"
	"testing"
)

func TestSchedules(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	// 10 steps an epoch, 4 epochs, 1 epoch of warm-up.
	base := schedule{base: 0.1, warmup: 10, total: 40, stepsPerEpoch: 10, every: 1, gamma: 0.5}
	for _, c := range []struct {
		kind string
		step int64
		want float64
	}{
		{"constant", 0, 0.01}, // warm-up: (0+1)/10 of the rate
		{"constant", 9, 0.1},
		{"constant", 39, 0.1},
		{"cosine", 10, 0.1},  // warm-up over: the full rate
		{"cosine", 25, 0.05}, // half-way through the remaining 30 steps
		{"cosine", 39, 0.1 * 0.5 * (1 + math.Cos(math.Pi*29/30))},
		{"linear", 10, 0.1},
		{"linear", 25, 0.05},
		{"step", 10, 0.05},   // epoch 1: one step of gamma
		{"step", 35, 0.0125}, // epoch 3
	} {
		s := base
		s.kind = c.kind
		if got := s.lr(c.step); !near(got, c.want) {
			t.Errorf("%s at step %d: %v, want %v", c.kind, c.step, got, c.want)
		}
	}
}
