package dataset

import (
	"fmt"
	"math"
)

// Subset is a view of some samples of a parent dataset, in the order of
// Indices. It shares the parent's files: closing a Subset does nothing, and
// the parent is closed by whoever opened it.
type Subset struct {
	Parent  Dataset
	Indices []int
}

var _ Dataset = (*Subset)(nil)

// NewSubset returns the samples of parent at the given indices, which must
// lie in [0, parent.Len()).
func NewSubset(parent Dataset, indices []int) *Subset {
	return &Subset{Parent: parent, Indices: indices}
}

// SplitByFraction splits ds into a training part holding round(frac·n)
// samples and a validation part holding the rest, by a shuffle that depends
// only on seed and n: the same seed always puts the same samples on the
// same side. Both parts are non-empty when ds has at least two samples,
// and each keeps ascending parent order (the loader shuffles per epoch).
// Sources whose blocks have a split field are split this way; sources
// with separate files for training and testing (idx) are not.
func SplitByFraction(ds Dataset, frac float64, seed int64) (train, val Dataset) {
	tr, va := splitIndices(ds.Len(), frac, seed)
	return NewSubset(ds, tr), NewSubset(ds, va)
}

// Len implements Dataset.
func (s *Subset) Len() int { return len(s.Indices) }

// XShape implements Dataset.
func (s *Subset) XShape() []int64 { return s.Parent.XShape() }

// YShape implements Dataset.
func (s *Subset) YShape() []int64 { return s.Parent.YShape() }

// Classes implements Dataset.
func (s *Subset) Classes() int { return s.Parent.Classes() }

// HasMask implements Dataset.
func (s *Subset) HasMask() bool { return s.Parent.HasMask() }

// Read implements Dataset by reading the parent's sample Indices[i].
func (s *Subset) Read(i int, x, y, mask []float32) error {
	if i < 0 || i >= len(s.Indices) {
		return fmt.Errorf("sample %d out of range [0, %d)", i, len(s.Indices))
	}
	return s.Parent.Read(s.Indices[i], x, y, mask)
}

// Close implements Dataset; it leaves the parent open.
func (s *Subset) Close() error { return nil }

// Root follows Subsets down to the dataset that holds the files, and maps
// sample i of ds to its index there.
func Root(ds Dataset, i int) (Dataset, int) {
	for {
		s, ok := ds.(*Subset)
		if !ok {
			return ds, i
		}
		ds, i = s.Parent, s.Indices[i]
	}
}

// splitByBlocks splits the tiles of a width×height raster by square
// blocks of size pixels a side, laid from the raster's top-left corner
// (those along the right and bottom edges may be narrower). The blocks
// that hold at least one whole tile are shuffled under seed and cut at
// round(frac·n), as splitIndices cuts samples: the first part trains, the
// rest validates (both non-empty). A tile that lies only in validation
// blocks validates; one that touches no validation block trains; one
// that straddles both is left out (straddling counts them). So no
// validation tile shares a pixel with a training tile. Each part is in
// ascending order. It fails when fewer than two blocks hold a whole tile,
// or when either part ends up without tiles.
func splitByBlocks(tiles []Window, width, height, size int, frac float64, seed int64) (train, val []int, straddling int, err error) {
	if size < 1 {
		return nil, nil, 0, fmt.Errorf("blocks of %d pixels", size)
	}
	bw, bh := (width+size-1)/size, (height+size-1)/size
	holds := make([]bool, bw*bh) // holds a whole tile
	for _, t := range tiles {
		bx0, by0 := t.X/size, t.Y/size
		if bx0 == (t.X+t.W-1)/size && by0 == (t.Y+t.H-1)/size {
			holds[by0*bw+bx0] = true
		}
	}
	var cand []int
	for i, h := range holds {
		if h {
			cand = append(cand, i)
		}
	}
	if len(cand) < 2 {
		return nil, nil, 0, fmt.Errorf("blocks of %dx%d pixels leave %d block(s) holding a whole tile; a split needs at least two: give smaller blocks", size, size, len(cand))
	}
	perm := newRNG(saltBlocks, uint64(seed)).perm(len(cand))
	k := min(max(int(math.Round(frac*float64(len(cand)))), 1), len(cand)-1)
	isVal := make([]bool, bw*bh)
	for _, i := range perm[k:] {
		isVal[cand[i]] = true
	}
	for i, t := range tiles {
		nv, n := 0, 0
		for by := t.Y / size; by <= (t.Y+t.H-1)/size; by++ {
			for bx := t.X / size; bx <= (t.X+t.W-1)/size; bx++ {
				n++
				if isVal[by*bw+bx] {
					nv++
				}
			}
		}
		switch nv {
		case 0:
			train = append(train, i)
		case n:
			val = append(val, i)
		default:
			straddling++
		}
	}
	if len(train) == 0 || len(val) == 0 {
		return nil, nil, straddling, fmt.Errorf("blocks of %dx%d pixels leave %d training and %d validation tiles (%d straddle both); give smaller blocks", size, size, len(train), len(val), straddling)
	}
	return train, val, straddling, nil
}
