package dataset

import (
	"fmt"
	"slices"

	"pipe/dataset/source"
)

// Augmentations transform one training sample, its input [C, H, W] and,
// when the target is per-pixel ([K, H, W] with the same H and W), the
// target and mask with it. Each listed transform is applied in the order
// flip_h, flip_v, rot90, crop, whatever order the list gives, with
// randomness from an rng seeded by (seed, epoch, sample index): a sample
// looks the same in an epoch whoever reads it, so the batches do not depend
// on the number of workers.
//
//   - flip_h mirrors left–right, with probability ½.
//   - flip_v mirrors top–bottom, with probability ½.
//   - rot90 rotates by 0, 90, 180 or 270 degrees, each with probability ¼;
//     it needs square samples (H = W).
//   - crop is the padded random crop of CIFAR training: the sample is
//     padded by 4 pixels of 0 on every side and an H×W window is cut at a
//     uniform offset in [0, 8]², so it moves by up to 4 pixels. Padding has
//     input 0 and target 0, and mask 0 when the dataset has a mask.

var knownAugments = []string{"flip_h", "flip_v", "rot90", "crop"}

const cropPad = 4

type augmenter struct {
	flipH, flipV, rot90, crop bool
	c, h, w                   int
	k                         int  // target channels when per-pixel
	pix                       bool // the target is per-pixel
	tmp                       []float32
}

// newAugmenter checks the list against the shapes.
func newAugmenter(list []string, xs, ys []int64) (*augmenter, error) {
	if len(list) == 0 {
		return nil, nil
	}
	a := &augmenter{}
	for _, s := range list {
		switch s {
		case "flip_h":
			a.flipH = true
		case "flip_v":
			a.flipV = true
		case "rot90":
			a.rot90 = true
		case "crop":
			a.crop = true
		default:
			return nil, fmt.Errorf("unknown augmentation %q (known: %v)", s, knownAugments)
		}
	}
	if len(xs) != 3 {
		return nil, fmt.Errorf("augment %v needs samples shaped [C, H, W]; these are %v", list, xs)
	}
	a.c, a.h, a.w = int(xs[0]), int(xs[1]), int(xs[2])
	if a.rot90 && a.h != a.w {
		return nil, fmt.Errorf("augment rot90 needs square samples; these are %dx%d", a.h, a.w)
	}
	if len(ys) == 3 && ys[1] == xs[1] && ys[2] == xs[2] {
		a.pix, a.k = true, int(ys[0])
	}
	return a, nil
}

// apply transforms one sample in place; mask may be nil.
func (a *augmenter) apply(r *source.RNG, x, y, mask []float32) {
	flipH := a.flipH && r.Intn(2) == 1
	flipV := a.flipV && r.Intn(2) == 1
	rot := 0
	if a.rot90 {
		rot = r.Intn(4)
	}
	dx, dy := 0, 0
	crop := a.crop
	if crop {
		dy, dx = r.Intn(2*cropPad+1)-cropPad, r.Intn(2*cropPad+1)-cropPad
	}
	planes := func(buf []float32, n int, fill float32, f func(p []float32, fill float32)) {
		plane := a.h * a.w
		for i := range n {
			f(buf[i*plane:(i+1)*plane], fill)
		}
	}
	do := func(f func(p []float32, fill float32)) {
		planes(x, a.c, 0, f)
		if a.pix {
			planes(y, a.k, 0, f)
			if mask != nil {
				planes(mask, a.k, 0, f)
			}
		}
	}
	if flipH {
		do(func(p []float32, _ float32) { a.flipPlaneH(p) })
	}
	if flipV {
		do(func(p []float32, _ float32) { a.flipPlaneV(p) })
	}
	if rot != 0 {
		do(func(p []float32, _ float32) { a.rotPlane(p, rot) })
	}
	if crop && (dx != 0 || dy != 0) {
		do(func(p []float32, fill float32) { a.shiftPlane(p, dx, dy, fill) })
	}
}

func (a *augmenter) flipPlaneH(p []float32) {
	for r := range a.h {
		slices.Reverse(p[r*a.w : (r+1)*a.w])
	}
}

func (a *augmenter) flipPlaneV(p []float32) {
	for r := 0; r < a.h/2; r++ {
		top, bot := p[r*a.w:(r+1)*a.w], p[(a.h-1-r)*a.w:(a.h-r)*a.w]
		for c := range top {
			top[c], bot[c] = bot[c], top[c]
		}
	}
}

// rotPlane rotates a square plane by k quarter turns counter-clockwise.
func (a *augmenter) rotPlane(p []float32, k int) {
	n := a.w
	if cap(a.tmp) < n*n {
		a.tmp = make([]float32, n*n)
	}
	t := a.tmp[:n*n]
	copy(t, p)
	for r := range n {
		for c := range n {
			var sr, sc int
			switch k {
			case 1: // out(r, c) = in(c, n−1−r)
				sr, sc = c, n-1-r
			case 2:
				sr, sc = n-1-r, n-1-c
			case 3:
				sr, sc = n-1-c, r
			}
			p[r*n+c] = t[sr*n+sc]
		}
	}
}

// shiftPlane is the padded crop: out(r, c) = in(r+dy, c+dx), fill
// outside.
func (a *augmenter) shiftPlane(p []float32, dx, dy int, fill float32) {
	if cap(a.tmp) < a.h*a.w {
		a.tmp = make([]float32, a.h*a.w)
	}
	t := a.tmp[:a.h*a.w]
	copy(t, p)
	for r := range a.h {
		sr := r + dy
		for c := range a.w {
			sc := c + dx
			if sr < 0 || sr >= a.h || sc < 0 || sc >= a.w {
				p[r*a.w+c] = fill
			} else {
				p[r*a.w+c] = t[sr*a.w+sc]
			}
		}
	}
}
