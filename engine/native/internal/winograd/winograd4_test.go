//go:build cgo

package winograd

import (
	"math"
	"math/rand"
	"testing"
)

// F(4×4, 3×3)'s transforms against a plain Go reading of their algebra,
// tile by tile, in the same order of operations, as
// TestTransformsMatchTheirAlgebra does for F(2×2, 3×3). The products
// that round (by 3/2, 1/3, 1/15) are wrapped in float32() so that Go
// never fuses them into a sum (the C is built in ISO C mode, which does
// not either); products by powers of two are exact, fused or not.

const (
	third     = float32(1.0 / 3)
	fifteenth = float32(1.0 / 15)
)

// bt6 is Bᵀ·d.
func bt6(d [6]float32) [6]float32 {
	a, b := d[4]-d[2], d[3]-d[1]
	h3, h2 := a-float32(1.5*d[3]), b-float32(1.5*d[2])
	return [6]float32{
		(d[0] - d[2]) + (a - float32(1.5*b)),
		h3 + h2,
		h3 - h2,
		a + 0.5*b,
		a - 2*b,
		(d[5] - d[3]) - (b + float32(1.5*a)),
	}
}

// at6 is Aᵀ·m.
func at6(m [6]float32) [4]float32 {
	e, d := m[1]+m[2], m[1]-m[2]
	return [4]float32{(m[0] + e) + (m[3] + 4*m[4]), d + 2*(m[3]-m[4]), e + (4*m[3] + m[4]), (d + 8*m[3]) + (m[5] - 0.5*m[4])}
}

// a4 is A·p.
func a4(p [4]float32) [6]float32 {
	e, o := p[0]+p[2], p[1]+p[3]
	return [6]float32{p[0], e + o, e - o, (p[0] + 4*p[2]) + 2*(p[1]+4*p[3]), (4*p[0] + p[2]) - (2*p[1] + 0.5*p[3]), p[3]}
}

// g3 is G·g.
func g3(g [3]float32) [6]float32 {
	s := g[0] + g[2]
	return [6]float32{
		g[0],
		-float32((s + g[1]) * third),
		float32((s - g[1]) * third),
		float32(((g[0] + 2*g[1]) + 4*g[2]) * fifteenth),
		-float32(((4*g[0] - 2*g[1]) + g[2]) * fifteenth),
		g[2],
	}
}

// gt6 is Gᵀ·u.
func gt6(u [6]float32) [3]float32 {
	o := float32((u[2] - u[1]) * third)
	return [3]float32{
		(u[0] + o) + float32((u[3]-4*u[4])*fifteenth),
		float32((2*(u[3]+u[4]))*fifteenth) - float32((u[1]+u[2])*third),
		(u[5] + o) + float32((4*u[3]-u[4])*fifteenth),
	}
}

func refIn4(x []float32, s shape, t0, t1, ld int) []float32 {
	th, tw := (s.h+3)/4, (s.w+3)/4
	v := make([]float32, 36*s.c*ld)
	at := func(c, nn, iy, ix int) float32 {
		if iy < 0 || iy >= s.h || ix < 0 || ix >= s.w {
			return 0
		}
		return x[((c*s.n+nn)*s.h+iy)*s.w+ix]
	}
	for t := t0; t < t1; t++ {
		nn, ty, tx := tileOf(t, th, tw)
		for c := 0; c < s.c; c++ {
			var r [6][6]float32 // r[a][j]: row a of Bᵀ·d, column j
			for j := 0; j < 6; j++ {
				var d [6]float32
				for i := range d {
					d[i] = at(c, nn, 4*ty-1+i, 4*tx-1+j)
				}
				col := bt6(d)
				for a := range col {
					r[a][j] = col[a]
				}
			}
			for a := 0; a < 6; a++ {
				for b, o := range bt6(r[a]) {
					v[(a*6+b)*s.c*ld+c*ld+t-t0] = o
				}
			}
		}
	}
	return v
}

func refDy4(dy []float32, s shape, t0, t1, ld int) []float32 {
	th, tw := (s.h+3)/4, (s.w+3)/4
	m := make([]float32, 36*s.c*ld)
	at := func(c, nn, iy, ix int) float32 {
		if iy >= s.h || ix >= s.w {
			return 0
		}
		return dy[((c*s.n+nn)*s.h+iy)*s.w+ix]
	}
	for t := t0; t < t1; t++ {
		nn, ty, tx := tileOf(t, th, tw)
		for o := 0; o < s.c; o++ {
			var r [6][4]float32
			for j := 0; j < 4; j++ {
				var p [4]float32
				for i := range p {
					p[i] = at(o, nn, 4*ty+i, 4*tx+j)
				}
				col := a4(p)
				for i := range col {
					r[i][j] = col[i]
				}
			}
			for i := 0; i < 6; i++ {
				for b, e := range a4(r[i]) {
					m[(i*6+b)*s.c*ld+o*ld+t-t0] = e
				}
			}
		}
	}
	return m
}

func refOut4(mm, y []float32, s shape, t0, t1, ld int, beta float32) {
	th, tw := (s.h+3)/4, (s.w+3)/4
	xs := s.c * ld
	for t := t0; t < t1; t++ {
		nn, ty, tx := tileOf(t, th, tw)
		for o := 0; o < s.c; o++ {
			var sm [4][6]float32
			for c := 0; c < 6; c++ {
				var col [6]float32
				for r := range col {
					col[r] = mm[(r*6+c)*xs+o*ld+t-t0]
				}
				for i, e := range at6(col) {
					sm[i][c] = e
				}
			}
			for i := 0; i < 4; i++ {
				val := at6(sm[i])
				for j := 0; j < 4; j++ {
					oy, ox := 4*ty+i, 4*tx+j
					if oy >= s.h || ox >= s.w {
						continue
					}
					p := &y[((o*s.n+nn)*s.h+oy)*s.w+ox]
					if beta == 0 {
						*p = val[j]
					} else {
						*p = val[j] + beta**p
					}
				}
			}
		}
	}
}

func TestTransforms4MatchTheirAlgebra(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, s := range []shape{
		{3, 2, 14, 14}, {2, 3, 7, 9}, {1, 2, 1, 1}, {2, 1, 2, 3}, {4, 2, 16, 5},
		{2, 2, 5, 6}, {1, 1, 3, 2100},
	} {
		th, tw := (s.h+3)/4, (s.w+3)/4
		T := s.n * th * tw
		x := randoms(r, s.c*s.n*s.h*s.w)
		for _, blk := range [][2]int{{0, T}, {1, T - 1}, {tw / 2, tw/2 + tw + 1}, {T / 2, T}} {
			t0, t1 := blk[0], min(blk[1], T)
			if t1 <= t0 {
				continue
			}
			ld := t1 - t0 + 3
			rows := make([]float32, 6*(s.w+6))

			v := make([]float32, 36*s.c*ld)
			In4(x, v, s.c, s.n, s.h, s.w, t0, t1, ld, rows)
			sameBits(t, "In4", v, refIn4(x, s, t0, t1, ld))

			m := make([]float32, 36*s.c*ld)
			Dy4(x, m, s.c, s.n, s.h, s.w, t0, t1, ld, rows)
			sameBits(t, "Dy4", m, refDy4(x, s, t0, t1, ld))

			mm := randoms(r, 36*s.c*ld)
			for _, beta := range []float32{0, 0.5} {
				y := randoms(r, len(x))
				want := append([]float32(nil), y...)
				Out4(mm, y, s.c, s.n, s.h, s.w, t0, t1, ld, beta, rows)
				refOut4(mm, want, s, t0, t1, ld, beta)
				sameBits(t, "Out4", y, want)
			}
		}
	}
}

// TestWeightTransforms4MatchTheirAlgebra holds Weights4 (G·g·Gᵀ), written
// in two ranges of output channels as workers split it, and WeightGrad4
// (dw += Gᵀ·dU·G) to the same reading, bit for bit; the first range
// leaves the second's rows as they were.
func TestWeightTransforms4MatchTheirAlgebra(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for _, sz := range weightSizes {
		co, ci := sz[0], sz[1]
		plane := co * ci
		g := randoms(r, plane*9)
		u := make([]float32, 36*plane)
		for i := range u {
			u[i] = float32(math.NaN())
		}
		half := co / 2
		Weights4(g, u, co, ci, 0, half)
		for x := 0; x < 36; x++ {
			for k := half * ci; k < plane; k++ {
				if e := u[x*plane+k]; e == e {
					t.Fatalf("co %d ci %d: Weights4 of channels [0, %d) wrote U[%d][%d] = %v", co, ci, half, x, k, e)
				}
			}
		}
		Weights4(g, u, co, ci, half, co)
		du := randoms(r, 36*plane)
		dw := randoms(r, plane*9)
		want, wantDw := make([]float32, 36*plane), append([]float32(nil), dw...)
		WeightGrad4(du, dw, co, ci)
		for k := 0; k < plane; k++ {
			var tg [6][3]float32 // G·g
			for b := 0; b < 3; b++ {
				col := g3([3]float32{g[k*9+b], g[k*9+3+b], g[k*9+6+b]})
				for a := range col {
					tg[a][b] = col[a]
				}
			}
			for a := 0; a < 6; a++ {
				for b, e := range g3(tg[a]) {
					want[(a*6+b)*plane+k] = e
				}
			}
			var rd [3][6]float32 // Gᵀ·dU
			for b := 0; b < 6; b++ {
				var col [6]float32
				for a := range col {
					col[a] = du[(a*6+b)*plane+k]
				}
				for a, e := range gt6(col) {
					rd[a][b] = e
				}
			}
			for a := 0; a < 3; a++ {
				for c, e := range gt6(rd[a]) {
					wantDw[k*9+a*3+c] += e
				}
			}
		}
		sameBits(t, "Weights4", u, want)
		sameBits(t, "WeightGrad4", dw, wantDw)
	}
}
