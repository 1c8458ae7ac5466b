package dataset

import (
	"math"
	"math/bits"
	"sort"
)

// Every random choice in this package (the split, the epoch's shuffle, the
// augmentations, the synthetic samples) draws from rng, a SplitMix64
// generator seeded by hashing the user's seed with what the choice is
// about: (seed, epoch) for a shuffle, (seed, epoch, sample index) for an
// augmentation. The stream is written here rather than taken from
// math/rand so that the same seed gives the same data in every Go release,
// and so that a sample's randomness depends on the sample alone, not on
// which worker reads it or in which order.

// Salts keep the streams for different purposes apart when they share a
// seed.
const (
	saltSplit   = 0x5a17_0001
	saltShuffle = 0x5a17_0002
	saltAugment = 0x5a17_0003
	saltSynth   = 0x5a17_0004
	saltSample  = 0x5a17_0005
	saltBlocks  = 0x5a17_0006
)

// mix hashes a sequence of words into one seed (SplitMix64's finaliser
// applied to a running combination).
func mix(words ...uint64) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, w := range words {
		h ^= w + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
		h = splitmix(h)
	}
	return h
}

func splitmix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// rng is a SplitMix64 generator. The zero value is a valid generator.
type rng struct {
	s       uint64
	spare   float64
	hasNorm bool
}

func newRNG(words ...uint64) *rng { return &rng{s: mix(words...)} }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	return splitmix(r.s)
}

// intn returns a uniform integer in [0, n) (Lemire's multiply-shift with
// rejection, so there is no modulo bias).
func (r *rng) intn(n int) int {
	if n <= 1 {
		return 0
	}
	un := uint64(n)
	hi, lo := bits.Mul64(r.next(), un)
	if lo < un {
		thresh := -un % un
		for lo < thresh {
			hi, lo = bits.Mul64(r.next(), un)
		}
	}
	return int(hi)
}

// float64 returns a uniform number in [0, 1).
func (r *rng) float64() float64 { return float64(r.next()>>11) / (1 << 53) }

// norm returns a standard normal number (Box–Muller, both values used).
func (r *rng) norm() float64 {
	if r.hasNorm {
		r.hasNorm = false
		return r.spare
	}
	u := 1 - r.float64() // (0, 1]
	v := r.float64()
	rad := math.Sqrt(-2 * math.Log(u))
	s, c := math.Sincos(2 * math.Pi * v)
	r.spare, r.hasNorm = rad*s, true
	return rad * c
}

// perm returns a uniform permutation of [0, n) (Fisher–Yates).
func (r *rng) perm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := r.intn(i + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// splitIndices shuffles [0, n) under seed and cuts it at round(frac·n):
// the first part trains, the rest validates. Each part is sorted so that
// reading it walks files forward. Both parts are non-empty when n ≥ 2.
func splitIndices(n int, frac float64, seed int64) (train, val []int) {
	p := newRNG(saltSplit, uint64(seed)).perm(n)
	k := int(math.Round(frac * float64(n)))
	if n >= 2 {
		k = min(max(k, 1), n-1)
	} else {
		k = n
	}
	train, val = p[:k:k], p[k:]
	sort.Ints(train)
	sort.Ints(val)
	return train, val
}
