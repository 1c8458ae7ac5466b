package source

import (
	"math"
	"math/bits"
	"sort"
)

// Every random choice of package data and its sources (the split, the
// epoch's shuffle, the augmentations, the synthetic samples) draws from
// RNG, a SplitMix64
// generator seeded by hashing the user's seed with what the choice is
// about: (seed, epoch) for a shuffle, (seed, epoch, sample index) for an
// augmentation. The stream is written here rather than taken from
// math/rand so that the same seed gives the same data in every Go release,
// and so that a sample's randomness depends on the sample alone, not on
// which worker reads it or in which order.

// Salts keep the streams for different purposes apart when they share a
// seed.
const (
	SaltSplit   = 0x5a17_0001
	SaltShuffle = 0x5a17_0002
	SaltAugment = 0x5a17_0003
	SaltSynth   = 0x5a17_0004
	SaltSample  = 0x5a17_0005
	SaltBlocks  = 0x5a17_0006
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

// RNG is a SplitMix64 generator. The zero value is a valid generator.
type RNG struct {
	s       uint64
	spare   float64
	hasNorm bool
}

// NewRNG is a generator seeded by hashing words: a salt, the seed and what
// the draw is about.
func NewRNG(words ...uint64) *RNG { return &RNG{s: mix(words...)} }

// Next returns the next 64 random bits.
func (r *RNG) Next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	return splitmix(r.s)
}

// Intn returns a uniform integer in [0, n) (Lemire's multiply-shift with
// rejection, so there is no modulo bias).
func (r *RNG) Intn(n int) int {
	if n <= 1 {
		return 0
	}
	un := uint64(n)
	hi, lo := bits.Mul64(r.Next(), un)
	if lo < un {
		thresh := -un % un
		for lo < thresh {
			hi, lo = bits.Mul64(r.Next(), un)
		}
	}
	return int(hi)
}

// Float64 returns a uniform number in [0, 1).
func (r *RNG) Float64() float64 { return float64(r.Next()>>11) / (1 << 53) }

// Norm returns a standard normal number (Box–Muller, both values used).
func (r *RNG) Norm() float64 {
	if r.hasNorm {
		r.hasNorm = false
		return r.spare
	}
	u := 1 - r.Float64() // (0, 1]
	v := r.Float64()
	rad := math.Sqrt(-2 * math.Log(u))
	s, c := math.Sincos(2 * math.Pi * v)
	r.spare, r.hasNorm = rad*s, true
	return rad * c
}

// Perm returns a uniform permutation of [0, n) (Fisher–Yates).
func (r *RNG) Perm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := r.Intn(i + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// SplitIndices shuffles [0, n) under seed and cuts it at round(frac·n):
// the first part trains, the rest validates. Each part is sorted so that
// reading it walks files forward. Both parts are non-empty when n ≥ 2.
func SplitIndices(n int, frac float64, seed int64) (train, val []int) {
	p := NewRNG(SaltSplit, uint64(seed)).Perm(n)
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
