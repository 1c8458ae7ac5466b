package weights

import (
	"math"
	"math/rand/v2"
)

// Uniform fills x from U(-bound, bound).
func Uniform(bound float64) Init {
	return func(r *rand.Rand, x []float32) {
		for i := range x {
			x[i] = float32((2*r.Float64() - 1) * bound)
		}
	}
}

// Kaiming is PyTorch's default for Linear and Conv weights,
// kaiming_uniform_(a=√5), which is U(-1/√fan_in, 1/√fan_in); their biases
// use the same bound.
func Kaiming(fanIn int64) Init { return Uniform(1 / math.Sqrt(float64(fanIn))) }

// Fill sets every value to v.
func Fill(v float32) Init {
	return func(_ *rand.Rand, x []float32) {
		for i := range x {
			x[i] = v
		}
	}
}

// Normal is N(0, std²), as nn.init.normal_.
func Normal(std float64) Init {
	return func(r *rand.Rand, x []float32) {
		for i := range x {
			x[i] = float32(r.NormFloat64() * std)
		}
	}
}

// SignSketch fills x with Panther's scaled_sign_sketch for rank k: ±1/√k,
// each sign a fair coin.
func SignSketch(rank int64) Init {
	v := float32(1 / math.Sqrt(float64(rank)))
	return func(r *rand.Rand, x []float32) {
		for i := range x {
			if r.Uint64()&1 == 0 {
				x[i] = v
			} else {
				x[i] = -v
			}
		}
	}
}

// FavorFeatures fills ω [m, d] as Panther's create_projection_matrix
// (scaling off) does: blocks of d orthonormal rows (Gram–Schmidt, in
// float64, on Gaussian rows: the Q of a QR, transposed), the last block
// cut to the rows left, then each row scaled by the norm of a fresh
// Gaussian d-vector (chi-distributed with d degrees of freedom).
func FavorFeatures(m, d int) Init {
	return func(r *rand.Rand, x []float32) {
		blk := make([]float64, d*d)
		for row0 := 0; row0 < m; row0 += d {
			for i := range blk {
				blk[i] = r.NormFloat64()
			}
			for i := 0; i < d; i++ {
				ri := blk[i*d : (i+1)*d]
				for j := 0; j < i; j++ {
					rj := blk[j*d : (j+1)*d]
					var p float64
					for c := range ri {
						p += ri[c] * rj[c]
					}
					for c := range ri {
						ri[c] -= p * rj[c]
					}
				}
				var nn float64
				for _, v := range ri {
					nn += v * v
				}
				nn = 1 / math.Sqrt(nn)
				for c := range ri {
					ri[c] *= nn
				}
			}
			for i := 0; i < d && row0+i < m; i++ {
				for c := 0; c < d; c++ {
					x[(row0+i)*d+c] = float32(blk[i*d+c])
				}
			}
		}
		for i := 0; i < m; i++ {
			var s float64
			for c := 0; c < d; c++ {
				g := r.NormFloat64()
				s += g * g
			}
			s = math.Sqrt(s)
			for c := 0; c < d; c++ {
				x[i*d+c] = float32(float64(x[i*d+c]) * s)
			}
		}
	}
}
