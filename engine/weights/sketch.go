package weights

// The sketched layers (Panther's SKLinear and SKConv2d) start from a
// dense weight W sketched into S: S1_i = W·U1_iᵀ and S2_i = U2_iᵀ·W, with
// U1 and U2 the layer's fixed sign sketches. W is drawn from its own
// stream ("<name>.W_init") so that S1 and S2 sketch the same W, with
// nn.init's kaiming_uniform_(a=√5) on W as Panther lays it out, [in, out]
// for SKLinear and [in, kh, kw, out] for SKConv2d, where PyTorch reads
// fan-in from the second axis onwards: U(±1/√fan) with fan = out
// (SKLinear) or kh·kw·out (SKConv2d). The bias is drawn from the same
// bound.

import "pipe/stdlib"

// DenseInit is the dense weight W of the sketched layer name, size values
// with fan-in fan, under seed.
func DenseInit(seed uint64, name string, size, fan int) []float32 {
	w := make([]float32, size)
	Kaiming(int64(fan))(Stream(seed, name+".W_init"), w)
	return w
}

// sketchS1 draws SKLinear's S1s [L, in, k]: S1_i = W·U1_iᵀ, with U1s
// [L, k, out] the layer's sign sketches.
func sketchS1(sk stdlib.Sketch) func(seed uint64, s []float32) {
	name := sk.Layer
	in, out, terms, rank := int(sk.In), int(sk.Out), int(sk.Terms), int(sk.Rank)
	u1 := SignSketch(sk.Rank)
	return func(seed uint64, s []float32) {
		w, u := DenseInit(seed, name, in*out, out), make([]float32, terms*rank*out)
		u1(Stream(seed, name+".U1s"), u)
		for i := 0; i < terms; i++ {
			ui, si := u[i*rank*out:], s[i*in*rank:]
			for a := 0; a < in; a++ {
				for r := 0; r < rank; r++ {
					var acc float64
					for o := 0; o < out; o++ {
						acc += float64(w[a*out+o]) * float64(ui[r*out+o])
					}
					si[a*rank+r] = float32(acc)
				}
			}
		}
	}
}

// sketchS2 draws SKLinear's S2s [L, k, out]: S2_i = U2_iᵀ·W, with U2s
// [L, in, k] the layer's sign sketches.
func sketchS2(sk stdlib.Sketch) func(seed uint64, s []float32) {
	name := sk.Layer
	in, out, terms, rank := int(sk.In), int(sk.Out), int(sk.Terms), int(sk.Rank)
	u2 := SignSketch(sk.Rank)
	return func(seed uint64, s []float32) {
		w, u := DenseInit(seed, name, in*out, out), make([]float32, terms*in*rank)
		u2(Stream(seed, name+".U2s"), u)
		for i := 0; i < terms; i++ {
			ui, si := u[i*in*rank:], s[i*rank*out:]
			for r := 0; r < rank; r++ {
				for o := 0; o < out; o++ {
					var acc float64
					for a := 0; a < in; a++ {
						acc += float64(ui[a*rank+r]) * float64(w[a*out+o])
					}
					si[r*out+o] = float32(acc)
				}
			}
		}
	}
}

// sketchConv draws SKConv2d's S1s [2L·k, in, kh, kw] (channel i·k+r is
// term i's r-th): S_i[r, c, a, b] = Σ_o K[c, a, b, o]·U_i[r, o] with K
// [in, kh, kw, out] and U1s [2L, k, out] the layer's sign sketches.
func sketchConv(sk stdlib.Sketch) func(seed uint64, s []float32) {
	name := sk.Layer
	in, out, kk := int(sk.In), int(sk.Out), int(sk.Kernel*sk.Kernel)
	mid := int(2 * sk.Terms * sk.Rank)
	u := SignSketch(sk.Rank)
	fan := kk * out
	return func(seed uint64, s []float32) {
		w, uu := DenseInit(seed, name, in*kk*out, fan), make([]float32, mid*out)
		u(Stream(seed, name+".U1s"), uu)
		for j := 0; j < mid; j++ {
			for p := 0; p < in*kk; p++ {
				var acc float64
				for o := 0; o < out; o++ {
					acc += float64(w[p*out+o]) * float64(uu[j*out+o])
				}
				s[j*in*kk+p] = float32(acc)
			}
		}
	}
}
