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

// tileGrid is the tiles of size×size every stride pixels of a w×h raster.
func tileGrid(w, h, size, stride int) []Window {
	var out []Window
	for y := 0; y+size <= h; y += stride {
		for x := 0; x+size <= w; x += stride {
			out = append(out, Window{X: x, Y: y, W: size, H: size})
		}
	}
	return out
}

// cover marks the pixels of a w-wide raster that the tiles idx cover.
func cover(tiles []Window, idx []int, w, h int) []bool {
	c := make([]bool, w*h)
	for _, i := range idx {
		t := tiles[i]
		for y := t.Y; y < t.Y+t.H; y++ {
			for x := t.X; x < t.X+t.W; x++ {
				c[y*w+x] = true
			}
		}
	}
	return c
}

func TestSplitByBlocks(t *testing.T) {
	const w, h = 40, 36
	tiles := tileGrid(w, h, 8, 4) // 9 columns × 8 rows of overlapping tiles
	tr, va, straddling, err := splitByBlocks(tiles, w, h, 16, 0.75, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr) == 0 || len(va) == 0 || straddling == 0 || len(tr)+len(va)+straddling != len(tiles) {
		t.Fatalf("%d train, %d val, %d straddling of %d tiles", len(tr), len(va), straddling, len(tiles))
	}
	if !slices.IsSorted(tr) || !slices.IsSorted(va) {
		t.Fatal("the parts are not in ascending order")
	}
	// No validation tile shares a pixel with a training tile.
	ct, cv := cover(tiles, tr, w, h), cover(tiles, va, w, h)
	for p := range ct {
		if ct[p] && cv[p] {
			t.Fatalf("pixel (%d, %d) is in a training and a validation tile", p%w, p/w)
		}
	}
	// Blocks of 16 on 40×36: 3×3 blocks, of which the 2×2 full ones and
	// the partial ones 8 pixels wide or high hold a whole 8×8 tile, all
	// 9; round(0.75·9) = 7 train, so the validation tiles lie in 2
	// blocks: at most 2 × 9 tiles (3×3 positions in a 16×16 block).
	if len(va) > 18 {
		t.Fatalf("%d validation tiles in 2 blocks", len(va))
	}
	tr2, va2, _, _ := splitByBlocks(tiles, w, h, 16, 0.75, 3)
	if !slices.Equal(tr, tr2) || !slices.Equal(va, va2) {
		t.Fatal("the same seed split differently")
	}
	differs := false
	for seed := int64(4); seed < 10 && !differs; seed++ {
		_, va3, _, _ := splitByBlocks(tiles, w, h, 16, 0.75, seed)
		differs = !slices.Equal(va, va3)
	}
	if !differs {
		t.Fatal("every seed holds out the same blocks")
	}
	// One block holding every tile cannot be split.
	if _, _, _, err := splitByBlocks(tiles, w, h, 40, 0.75, 3); err == nil {
		t.Fatal("blocks of 40 on 40×36 split")
	}
}
