//go:build cgo

package winograd

import (
	"math"
	"math/rand"
	"testing"
)

// The transforms against a plain Go reading of their algebra, tile by
// tile, in the same order of operations: the C loops must give the same
// bits (zeros' signs included) for every shape, including odd sizes,
// blocks that cross images and rows wider than wino_zero.

type shape struct{ c, n, h, w int }

func tileOf(t, th, tw int) (nn, ty, tx int) {
	nn = t / (th * tw)
	q := t - nn*th*tw
	return nn, q / tw, q % tw
}

func refIn(x []float32, s shape, t0, t1, ld int) []float32 {
	th, tw := (s.h+1)/2, (s.w+1)/2
	v := make([]float32, 16*s.c*ld)
	at := func(c, nn, iy, ix int) float32 {
		if iy < 0 || iy >= s.h || ix < 0 || ix >= s.w {
			return 0
		}
		return x[((c*s.n+nn)*s.h+iy)*s.w+ix]
	}
	for t := t0; t < t1; t++ {
		nn, ty, tx := tileOf(t, th, tw)
		for c := 0; c < s.c; c++ {
			var r [4][4]float32
			for j := 0; j < 4; j++ {
				var d [4]float32
				for i := range d {
					d[i] = at(c, nn, 2*ty-1+i, 2*tx-1+j)
				}
				r[0][j], r[1][j], r[2][j], r[3][j] = d[0]-d[2], d[1]+d[2], d[2]-d[1], d[1]-d[3]
			}
			for a := 0; a < 4; a++ {
				q := r[a]
				out := [4]float32{q[0] - q[2], q[1] + q[2], q[2] - q[1], q[1] - q[3]}
				for b, o := range out {
					v[(a*4+b)*s.c*ld+c*ld+t-t0] = o
				}
			}
		}
	}
	return v
}

func refDy(dy []float32, s shape, t0, t1, ld int) []float32 {
	th, tw := (s.h+1)/2, (s.w+1)/2
	m := make([]float32, 16*s.c*ld)
	at := func(c, nn, iy, ix int) float32 {
		if iy >= s.h || ix >= s.w {
			return 0
		}
		return dy[((c*s.n+nn)*s.h+iy)*s.w+ix]
	}
	for t := t0; t < t1; t++ {
		nn, ty, tx := tileOf(t, th, tw)
		for o := 0; o < s.c; o++ {
			var r [4][2]float32
			for j := 0; j < 2; j++ {
				a, c := at(o, nn, 2*ty, 2*tx+j), at(o, nn, 2*ty+1, 2*tx+j)
				r[0][j], r[1][j], r[2][j], r[3][j] = a, a+c, a-c, -c
			}
			for i := 0; i < 4; i++ {
				p, q := r[i][0], r[i][1]
				out := [4]float32{p, p + q, p - q, -q}
				for b, e := range out {
					m[(i*4+b)*s.c*ld+o*ld+t-t0] = e
				}
			}
		}
	}
	return m
}

func refOut(mm, y []float32, s shape, t0, t1, ld int, beta float32) {
	th, tw := (s.h+1)/2, (s.w+1)/2
	xs := s.c * ld
	for t := t0; t < t1; t++ {
		nn, ty, tx := tileOf(t, th, tw)
		for o := 0; o < s.c; o++ {
			var sm [2][4]float32
			for c := 0; c < 4; c++ {
				g := func(r int) float32 { return mm[(r*4+c)*xs+o*ld+t-t0] }
				sm[0][c] = g(0) + g(1) + g(2)
				sm[1][c] = g(1) - g(2) - g(3)
			}
			val := [2][2]float32{
				{sm[0][0] + sm[0][1] + sm[0][2], sm[0][1] - sm[0][2] - sm[0][3]},
				{sm[1][0] + sm[1][1] + sm[1][2], sm[1][1] - sm[1][2] - sm[1][3]},
			}
			for i := 0; i < 2; i++ {
				for j := 0; j < 2; j++ {
					oy, ox := 2*ty+i, 2*tx+j
					if oy >= s.h || ox >= s.w {
						continue
					}
					p := &y[((o*s.n+nn)*s.h+oy)*s.w+ox]
					if beta == 0 {
						*p = val[i][j]
					} else {
						*p = val[i][j] + beta**p
					}
				}
			}
		}
	}
}

func randoms(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
		if r.Intn(7) == 0 {
			v[i] = 0 // exact zeros, whose signs the transforms must keep
		}
	}
	return v
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: value %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

func TestTransformsMatchTheirAlgebra(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, s := range []shape{
		{3, 2, 14, 14}, {2, 3, 7, 9}, {1, 2, 1, 1}, {2, 1, 2, 3}, {4, 2, 16, 5},
		{1, 1, 3, 2100}, // wider than the column loops' zero row
	} {
		th, tw := (s.h+1)/2, (s.w+1)/2
		T := s.n * th * tw
		x := randoms(r, s.c*s.n*s.h*s.w)
		for _, blk := range [][2]int{{0, T}, {1, T - 1}, {tw / 2, tw/2 + tw + 1}, {T / 2, T}} {
			t0, t1 := blk[0], min(blk[1], T)
			if t1 <= t0 {
				continue
			}
			ld := t1 - t0 + 3
			rows := make([]float32, 4*(s.w+4))

			v := make([]float32, 16*s.c*ld)
			In(x, v, s.c, s.n, s.h, s.w, t0, t1, ld, rows)
			sameBits(t, "In", v, refIn(x, s, t0, t1, ld))

			m := make([]float32, 16*s.c*ld)
			Dy(x, m, s.c, s.n, s.h, s.w, t0, t1, ld, rows)
			sameBits(t, "Dy", m, refDy(x, s, t0, t1, ld))

			mm := randoms(r, 16*s.c*ld)
			for _, beta := range []float32{0, 0.5} {
				y := randoms(r, len(x))
				want := append([]float32(nil), y...)
				Out(mm, y, s.c, s.n, s.h, s.w, t0, t1, ld, beta, rows)
				refOut(mm, want, s, t0, t1, ld, beta)
				sameBits(t, "Out", y, want)
			}
		}
	}
}

// weightSizes are the [co, ci] the weight transforms are tested on: rows
// shorter than, as long as and longer than WT_BLOCK (64), with a part
// block.
var weightSizes = [][2]int{{1, 1}, {3, 5}, {8, 2}, {2, 64}, {3, 131}}

// g4 is G·g of F(2×2, 3×3).
func g4(g [3]float32) [4]float32 {
	return [4]float32{g[0], 0.5 * (g[0] + g[1] + g[2]), 0.5 * (g[0] - g[1] + g[2]), g[2]}
}

// gt4 is Gᵀ·u of F(2×2, 3×3).
func gt4(u [4]float32) [3]float32 {
	h := float32(0.5 * (u[1] + u[2]))
	return [3]float32{u[0] + h, float32(0.5 * (u[1] - u[2])), h + u[3]}
}

// TestWeightTransformsMatchTheirAlgebra holds Weights (G·g·Gᵀ), written
// in two ranges of output channels as workers split it, and WeightGrad
// (dw += Gᵀ·dU·G) to a plain Go reading, bit for bit; the first range
// leaves the second's rows as they were.
func TestWeightTransformsMatchTheirAlgebra(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, sz := range weightSizes {
		co, ci := sz[0], sz[1]
		plane := co * ci
		g := randoms(r, plane*9)
		u := make([]float32, 16*plane)
		for i := range u {
			u[i] = float32(math.NaN())
		}
		half := co / 2
		Weights(g, u, co, ci, 0, half)
		for x := 0; x < 16; x++ {
			for k := half * ci; k < plane; k++ {
				if e := u[x*plane+k]; e == e {
					t.Fatalf("co %d ci %d: Weights of channels [0, %d) wrote U[%d][%d] = %v", co, ci, half, x, k, e)
				}
			}
		}
		Weights(g, u, co, ci, half, co)
		du := randoms(r, 16*plane)
		dw := randoms(r, plane*9)
		want, wantDw := make([]float32, 16*plane), append([]float32(nil), dw...)
		WeightGrad(du, dw, co, ci)
		for k := 0; k < plane; k++ {
			var tg [4][3]float32 // G·g
			for b := 0; b < 3; b++ {
				for a, e := range g4([3]float32{g[k*9+b], g[k*9+3+b], g[k*9+6+b]}) {
					tg[a][b] = e
				}
			}
			for a := 0; a < 4; a++ {
				for b, e := range g4(tg[a]) {
					want[(a*4+b)*plane+k] = e
				}
			}
			var rd [3][4]float32 // Gᵀ·dU
			for b := 0; b < 4; b++ {
				var col [4]float32
				for a := range col {
					col[a] = du[(a*4+b)*plane+k]
				}
				for a, e := range gt4(col) {
					rd[a][b] = e
				}
			}
			for a := 0; a < 3; a++ {
				for c, e := range gt4(rd[a]) {
					wantDw[k*9+a*3+c] += e
				}
			}
		}
		sameBits(t, "Weights", u, want)
		sameBits(t, "WeightGrad", dw, wantDw)
	}
}
