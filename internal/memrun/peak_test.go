package memrun

import "testing"

// TestEpochPeakSteps: a run past its first epoch's end by one step where
// that end comes before most steps, least steps otherwise.
func TestEpochPeakSteps(t *testing.T) {
	for _, c := range []struct{ epoch, want int }{
		{446, 4}, // fashion_mlp: no epoch end within 12 steps
		{12, 4},  // an end at the 12th step is not reached before it
		{11, 12}, // olinda
		{5, 6},   // deeplab_olinda's plan
		{2, 4},   // pharma: least is past the end already
		{1, 4},
	} {
		if got := epochPeakSteps(c.epoch, 4, 12); got != c.want {
			t.Errorf("an epoch of %d steps: %d steps, want %d", c.epoch, got, c.want)
		}
	}
}
