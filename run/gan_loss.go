package run

import "math"

// advRole says which of a gan's three adversarial terms a discriminator's
// logits are scored by.
type advRole int

const (
	advReal advRole = iota // the discriminator on the targets
	advFake                // the discriminator on the generator's output
	advGen                 // the generator's term on its own output
)

// AdvLoss is the adversarial loss kind (bce, lsgan or hinge) for role on
// logits z, the mean over every value, and writes to dz its gradient
// times scale. The torch worker's gan_loss computes the same:
//
//	bce:   real, gen: softplus(-z)     fake: softplus(z)
//	lsgan: real, gen: (z-1)²          fake: z²
//	hinge: real: relu(1-z)  fake: relu(1+z)  gen: -z
func advLoss(kind string, role advRole, z, dz []float32, scale float64) float64 {
	n := len(z)
	if n == 0 {
		return 0
	}
	inv := 1 / float64(n)
	g := scale * inv
	var s float64
	for i, v32 := range z {
		v := float64(v32)
		var l, d float64
		switch kind {
		case "lsgan":
			t := 0.0
			if role != advFake {
				t = 1
			}
			l, d = (v-t)*(v-t), 2*(v-t)
		case "hinge":
			switch role {
			case advReal:
				if v < 1 {
					l, d = 1-v, -1
				}
			case advFake:
				if v > -1 {
					l, d = 1+v, 1
				}
			default:
				l, d = -v, -1
			}
		default: // bce on logits
			sig := 1 / (1 + math.Exp(-v))
			sp := math.Max(v, 0) + math.Log1p(math.Exp(-math.Abs(v))) // softplus(v)
			if role == advFake {
				l, d = sp, sig
			} else {
				l, d = sp-v, sig-1
			}
		}
		s += l
		dz[i] = float32(d * g)
	}
	return s * inv
}
