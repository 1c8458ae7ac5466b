package native

import (
	"math"
	"unsafe"

	"pipe/engine/native/internal/cvec"
)

// asInt32 views a float32 buffer as int32s (max-pool's argmax indices
// live in the arena with everything else).
func asInt32(f []float32) []int32 {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&f[0])), len(f))
}

// poolKernel is maxpool or avgpool over square windows. The planes (one
// per channel and sample) are independent, so workers split them. Max
// keeps the index of each window's maximum within its plane; average
// counts padding as zeros (PyTorch's count_include_pad).
type poolKernel struct {
	max          bool
	c            int
	k, s, p      int
	h, w, ho, wo int
}

func (k *poolKernel) spec() kspec {
	if k.max {
		return kspec{saveIn: []bool{false}, aux: []bsize{{perSample: k.c * k.ho * k.wo}}}
	}
	return kspec{saveIn: []bool{false}}
}

func (k *poolKernel) forward(e *env) {
	planes := e.u.out.c * e.n
	x, y := e.in[0], e.out
	hw, howo := k.h*k.w, k.ho*k.wo
	var idx []int32
	if k.max {
		idx = asInt32(e.aux[0])
	}
	e.m.pool.forRange(planes, 4, func(lo, hi int) {
		if k.max && k.k == 2 && k.s == 2 && k.p == 0 && cvec.Built && !e.train {
			// Inference: no backward pass reads the indices.
			cvec.Max2x2PlanesEval(x[lo*hw:hi*hw], y[lo*howo:hi*howo], k.w, k.h, k.ho, k.wo, hi-lo)
			return
		}
		if k.max && k.k == 2 && k.s == 2 && k.p == 0 && cvec.Built {
			// One call for the range: a call per plane cost as much as
			// the pooling of a 14×14 plane.
			cvec.Max2x2Planes(x[lo*hw:hi*hw], y[lo*howo:hi*howo], idx[lo*howo:hi*howo], k.w, k.h, k.ho, k.wo, hi-lo)
			return
		}
		for pl := lo; pl < hi; pl++ {
			src := x[pl*hw : (pl+1)*hw]
			dst := y[pl*howo : (pl+1)*howo]
			if k.max {
				ix := idx[pl*howo : (pl+1)*howo]
				if k.k == 2 && k.s == 2 && k.p == 0 {
					max2x2(src, dst, ix, k.w, k.ho, k.wo)
					continue
				}
				for oh := 0; oh < k.ho; oh++ {
					for ow := 0; ow < k.wo; ow++ {
						best := float32(math.Inf(-1))
						bi := int32(-1)
						for kh := 0; kh < k.k; kh++ {
							ih := oh*k.s - k.p + kh
							if ih < 0 || ih >= k.h {
								continue
							}
							for kw := 0; kw < k.k; kw++ {
								iw := ow*k.s - k.p + kw
								if iw < 0 || iw >= k.w {
									continue
								}
								// NaN wins, as in PyTorch.
								if v := src[ih*k.w+iw]; bi < 0 || v > best || (v != v && best == best) {
									best, bi = v, int32(ih*k.w+iw)
								}
							}
						}
						dst[oh*k.wo+ow] = best
						ix[oh*k.wo+ow] = bi
					}
				}
				continue
			}
			inv := 1 / float32(k.k*k.k)
			for oh := 0; oh < k.ho; oh++ {
				for ow := 0; ow < k.wo; ow++ {
					var s float32
					for kh := 0; kh < k.k; kh++ {
						ih := oh*k.s - k.p + kh
						if ih < 0 || ih >= k.h {
							continue
						}
						for kw := 0; kw < k.k; kw++ {
							iw := ow*k.s - k.p + kw
							if iw >= 0 && iw < k.w {
								s += src[ih*k.w+iw]
							}
						}
					}
					dst[oh*k.wo+ow] = s * inv
				}
			}
		}
	})
}

// orderKey maps a float32 to an int32 with the same order (every NaN
// above +Inf, so NaN wins as in PyTorch), so maxima are integer comparisons the compiler turns into
// conditional moves: a max-pool's comparisons on real activations are
// coin flips, and mispredicted branches cost more than the rest of it.
func orderKey(v float32) int32 {
	u := math.Float32bits(v)
	b := int32(u)
	k := b ^ (b >> 31 & 0x7fffffff)
	nan := int32(nanMask(u))
	return k&^nan | nan&0x7fffffff
}

func fromKey(k int32) float32 {
	return math.Float32frombits(uint32(k ^ (k >> 31 & 0x7fffffff)))
}

// max2x2 is the common 2×2, stride-2 max-pool of one plane; ties go to
// the first maximum, as in PyTorch.
func max2x2(src, dst []float32, ix []int32, w, ho, wo int) {
	for oh := 0; oh < ho; oh++ {
		r0 := src[2*oh*w : 2*oh*w+w]
		r1 := src[(2*oh+1)*w : (2*oh+1)*w+w]
		d := dst[oh*wo : (oh+1)*wo]
		id := ix[oh*wo : (oh+1)*wo]
		base := int32(2 * oh * w)
		for ow := range d {
			j := 2 * ow
			ka, kb, kc, kd := orderKey(r0[j]), orderKey(r0[j+1]), orderKey(r1[j]), orderKey(r1[j+1])
			i0 := int32(0)
			if kb > ka {
				ka = kb
				i0 = 1
			}
			i1 := int32(w)
			if kd > kc {
				kc = kd
				i1 = int32(w + 1)
			}
			if kc > ka {
				ka = kc
				i0 = i1
			}
			d[ow] = fromKey(ka)
			id[ow] = base + int32(j) + i0
		}
	}
}

func (k *poolKernel) backward(e *env) {
	dx := e.din[0]
	if dx == nil {
		return
	}
	planes := e.u.out.c * e.n
	g := e.dout
	hw, howo := k.h*k.w, k.ho*k.wo
	var idx []int32
	if k.max {
		idx = asInt32(e.aux[0])
	}
	acc := e.acc[0]
	e.m.pool.forRange(planes, 4, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			d := dx[pl*hw : (pl+1)*hw]
			gp := g[pl*howo : (pl+1)*howo]
			if !acc {
				clear(d)
			}
			if k.max {
				for i, j := range idx[pl*howo : (pl+1)*howo] {
					if j >= 0 {
						d[j] += gp[i]
					}
				}
				continue
			}
			inv := 1 / float32(k.k*k.k)
			for oh := 0; oh < k.ho; oh++ {
				for ow := 0; ow < k.wo; ow++ {
					v := gp[oh*k.wo+ow] * inv
					for kh := 0; kh < k.k; kh++ {
						ih := oh*k.s - k.p + kh
						if ih < 0 || ih >= k.h {
							continue
						}
						for kw := 0; kw < k.k; kw++ {
							iw := ow*k.s - k.p + kw
							if iw >= 0 && iw < k.w {
								d[ih*k.w+iw] += v
							}
						}
					}
				}
			}
		}
	})
}

// gapKernel averages each channel's plane: [C, H, W] (CNHW) to [C] (NF),
// or to [C, 1, 1] (CNHW, which is [C][N]) with keepdims.
type gapKernel struct {
	keep bool
	s    int
}

func (k *gapKernel) spec() kspec { return kspec{saveIn: []bool{false}} }

func (k *gapKernel) forward(e *env) {
	c, n := e.u.in[0].c, e.n
	x, y := e.in[0], e.out
	inv := 1 / float64(k.s)
	e.m.pool.forRange(c, 1, func(lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			for i := 0; i < n; i++ {
				v := float32(sum64(x[(ch*n+i)*k.s:(ch*n+i+1)*k.s]) * inv)
				if k.keep {
					y[ch*n+i] = v
				} else {
					y[i*c+ch] = v
				}
			}
		}
	})
}

func (k *gapKernel) backward(e *env) {
	dx := e.din[0]
	if dx == nil {
		return
	}
	c, n := e.u.in[0].c, e.n
	g := e.dout
	inv := 1 / float32(k.s)
	acc := e.acc[0]
	e.m.pool.forRange(c, 1, func(lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			for i := 0; i < n; i++ {
				var v float32
				if k.keep {
					v = g[ch*n+i] * inv
				} else {
					v = g[i*c+ch] * inv
				}
				d := dx[(ch*n+i)*k.s : (ch*n+i+1)*k.s]
				if acc {
					for j := range d {
						d[j] += v
					}
				} else {
					for j := range d {
						d[j] = v
					}
				}
			}
		}
	})
}

func init() {
	registerKernel("maxpool", opKernel{build: buildPool})
	registerKernel("avgpool", opKernel{build: buildPool})
	registerKernel("gap", opKernel{build: buildGap})
}

// buildPool is a maxpool's or avgpool's kernel; over a volume, maxpool's
// only.
func buildPool(_ *model, u *unit, _ tail) (kernel, error) {
	first, a, in := u.nodes[0], u.nodes[0].Args, u.in0()
	if !in.spatial {
		return nil, unsupported(first, "needs [C, H, W]")
	}
	s := a.Stride
	if s == 0 {
		s = a.Kernel
	}
	if in.vol() {
		if first.Op != "maxpool" {
			return nil, unsupported(first, "over a volume is not implemented (maxpool is)")
		}
		o := u.out
		return &pool3Kernel{c: o.c, k: int(a.Kernel), s: int(s), p: int(a.Padding), d: in.d, h: in.h, w: in.w, do: o.d, ho: o.h, wo: o.w}, nil
	}
	return &poolKernel{max: first.Op == "maxpool", c: u.out.c, k: int(a.Kernel), s: int(s), p: int(a.Padding),
		h: in.h, w: in.w, ho: u.out.h, wo: u.out.w}, nil
}

func buildGap(_ *model, u *unit, _ tail) (kernel, error) {
	in := u.in0()
	if !in.spatial {
		return nil, unsupported(u.nodes[0], "needs [C, H, W]")
	}
	return &gapKernel{keep: u.out.spatial, s: in.s()}, nil
}
