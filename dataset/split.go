package dataset

import (
	"fmt"

	"pipe/dataset/source"
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
	tr, va := source.SplitIndices(ds.Len(), frac, seed)
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

// Prefetch implements Prefetcher when the parent does, mapping the
// samples to the parent's.
func (s *Subset) Prefetch(indices []int) {
	pf, ok := s.Parent.(Prefetcher)
	if !ok {
		return
	}
	p := make([]int, 0, len(indices))
	for _, i := range indices {
		if i >= 0 && i < len(s.Indices) {
			p = append(p, s.Indices[i])
		}
	}
	pf.Prefetch(p)
}
