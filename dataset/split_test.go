package dataset

import (
	"slices"
	"testing"
)

func TestSplitByFraction(t *testing.T) {
	ds := newMem(101)
	tr, va := SplitByFraction(ds, 0.8, 5)
	if tr.Len() != 81 || va.Len() != 20 {
		t.Fatalf("split %d/%d, want 81/20", tr.Len(), va.Len())
	}
	all := append(slices.Clone(tr.(*Subset).Indices), va.(*Subset).Indices...)
	slices.Sort(all)
	for i, v := range all {
		if v != i {
			t.Fatalf("the parts are not a partition: %v", all)
		}
	}
	tr2, _ := SplitByFraction(ds, 0.8, 5)
	if !slices.Equal(tr.(*Subset).Indices, tr2.(*Subset).Indices) {
		t.Fatal("the same seed split differently")
	}
	tr3, _ := SplitByFraction(ds, 0.8, 6)
	if slices.Equal(tr.(*Subset).Indices, tr3.(*Subset).Indices) {
		t.Fatal("seeds 5 and 6 split the same way")
	}
	x, y := make([]float32, 32), make([]float32, 1)
	if err := va.Read(3, x, y, nil); err != nil || int(y[0]) != va.(*Subset).Indices[3] {
		t.Fatalf("subset read: %v %v", y, err)
	}
	if root, i := Root(va, 3); root != ds || i != va.(*Subset).Indices[3] {
		t.Fatal("Root does not find the parent")
	}
	// Tiny sets keep both parts non-empty.
	if tr, va := SplitByFraction(newMem(2), 0.99, 1); tr.Len() != 1 || va.Len() != 1 {
		t.Fatalf("two samples split %d/%d", tr.Len(), va.Len())
	}
}
