package native

import "math"

// Single-precision exp and erf for the hot elementwise loops (attention's
// softmax, gelu), where float64 math.Exp and math.Erf took more time than
// the matrix products of a small transformer. exp32 is Cephes' expf
// (range reduction by ln 2, a degree-6 polynomial; about 1 ulp); erf32 is
// Abramowitz and Stegun's 7.1.26 (absolute error below 1.5e-7, 5e-7 in float32), the form
// PyTorch's vectorised CPU erf uses.

const (
	ln2Hi  = 0.693359375
	ln2Lo  = -2.12194440e-4
	log2e  = 1.44269504088896341
	expMax = 88.3762626647949
	expMin = -87.3365447504
)

func exp32(x float32) float32 {
	if x > expMax {
		return float32(math.Inf(1))
	}
	if x < expMin {
		return 0
	}
	if x != x {
		return x
	}
	n := float32(math.Floor(float64(x*log2e + 0.5)))
	r := x - n*ln2Hi - n*ln2Lo
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	y := p*r*r + r + 1
	return y * math.Float32frombits(uint32(int32(n)+127)<<23)
}

func erf32(x float32) float32 {
	s := float32(1)
	if x < 0 {
		s, x = -1, -x
	}
	t := 1 / (1 + 0.3275911*x)
	p := float32(1.061405429)
	p = p*t - 1.453152027
	p = p*t + 1.421413741
	p = p*t - 0.284496736
	p = p*t + 0.254829592
	return s * (1 - p*t*exp32(-x*x))
}
