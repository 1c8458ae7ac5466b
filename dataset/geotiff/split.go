package geotiff

import (
	"fmt"
	"math"

	"pipe/dataset/source"
)

// splitByBlocks splits the tiles of a width×height raster by square
// blocks of size pixels a side, laid from the raster's top-left corner
// (those along the right and bottom edges may be narrower). The blocks
// that hold at least one whole tile are shuffled under seed and cut at
// round(frac·n), as source.SplitIndices cuts samples: the first part trains, the
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
	perm := source.NewRNG(source.SaltBlocks, uint64(seed)).Perm(len(cand))
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
