package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"pipe/exec/cpu/internal/cvec"
)

// TestMax2x2C holds internal/cvec's C max-pool to pool2d.go's max2x2, bit
// for bit and index for index, on planes with ties, signed zeros,
// infinities and NaNs, of even and odd sides.
func TestMax2x2C(t *testing.T) {
	if !cvec.Built {
		t.Skip("built without cgo")
	}
	r := rand.New(rand.NewPCG(1, 2))
	special := []float32{0, float32(math.Copysign(0, -1)), 1, 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0xffc00001)}
	for _, sz := range [][2]int{{2, 2}, {4, 6}, {5, 7}, {28, 28}, {14, 14}, {3, 33}} {
		h, w := sz[0], sz[1]
		ho, wo := h/2, w/2
		for trial := 0; trial < 20; trial++ {
			src := make([]float32, h*w)
			for i := range src {
				if r.IntN(4) == 0 {
					src[i] = special[r.IntN(len(special))]
				} else {
					src[i] = float32(r.IntN(5) - 2) // many ties
				}
			}
			want, got := make([]float32, ho*wo), make([]float32, ho*wo)
			wi, gi := make([]int32, ho*wo), make([]int32, ho*wo)
			max2x2(src, want, wi, w, ho, wo)
			cvec.Max2x2(src, got, gi, w, ho, wo)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(want[i] != want[i] && got[i] != got[i]) || gi[i] != wi[i] {
					t.Fatalf("%s: [%d] C %v at %d, Go %v at %d", fmt.Sprint(sz), i, got[i], gi[i], want[i], wi[i])
				}
			}
		}
	}
}
