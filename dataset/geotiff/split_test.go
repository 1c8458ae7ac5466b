package geotiff

import (
	"slices"
	"testing"
)

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
