package stdlib

import (
	"fmt"
	"math"
)

// EfficientNet B0 to B4 as torchvision builds them (torchvision.models.
// efficientnet_bN): B0's seven stages of MBConv blocks, widened and
// deepened per variant. docs/design/families.md has the details.

// effnetCfg is a variant's width and depth multipliers and its
// classifier's dropout.
type effnetCfg struct{ width, depth, dropout float64 }

var effnets = map[string]effnetCfg{
	"efficientnet_b0": {1.0, 1.0, 0.2},
	"efficientnet_b1": {1.0, 1.1, 0.2},
	"efficientnet_b2": {1.1, 1.2, 0.3},
	"efficientnet_b3": {1.2, 1.4, 0.3},
	"efficientnet_b4": {1.4, 1.8, 0.4},
}

// effnetStages is B0's: expand ratio, kernel, stride, input and output
// channels, blocks.
var effnetStages = [7][6]int64{
	{1, 3, 1, 32, 16, 1},
	{6, 3, 2, 16, 24, 2},
	{6, 5, 2, 24, 40, 2},
	{6, 3, 2, 40, 80, 3},
	{6, 5, 1, 80, 112, 3},
	{6, 5, 2, 112, 192, 4},
	{6, 3, 1, 192, 320, 1},
}

// divisible8 is torchvision's _make_divisible(v, 8): v rounded to the
// nearest multiple of 8, at least 8, and not below 90% of v.
func divisible8(v float64) int64 {
	n := max(8, int64(v+4)/8*8)
	if float64(n) < 0.9*v {
		n += 8
	}
	return n
}

// effnetEncoder builds torchvision's features.0 (the stem) to features.7
// (the last stage) under pre, and returns the outputs at strides 2, 4, 8,
// 16 and 32: the stem's and stages 2, 3, 5 and 7's (smp's skips), then
// the last stage's channels. sd is the stochastic depth of the last block.
// It stops once it has levels outputs (a shallower unet's).
func (f *fam) effnetEncoder(x int, cfg effnetCfg, pre string, sd float64, levels int) []int {
	ch := func(c int64) int64 { return divisible8(float64(c) * cfg.width) }
	blocks := func(n int64) int64 { return int64(math.Ceil(float64(n) * cfg.depth)) }
	cba := func(name string, x int, out, k, s, g int64, act bool) int {
		x = f.conv(name+"0", x, out, k, s, (k-1)/2, 1, g, false)
		x = f.bn(name+"1", x)
		if act {
			x = f.act(name+"2", "silu", x)
		}
		return x
	}
	x = cba(pre+"features.0.", x, ch(32), 3, 2, 1, true)
	feats := []int{x}
	if levels <= 1 {
		return feats
	}
	var total, id int64
	for _, st := range effnetStages {
		total += blocks(st[5])
	}
	for si, st := range effnetStages {
		for j := int64(0); j < blocks(st[5]); j++ {
			in, out, s := ch(st[3]), ch(st[4]), st[2]
			if j > 0 {
				in, s = out, 1
			}
			nm := fmt.Sprintf("%sfeatures.%d.%d.", pre, si+1, j)
			exp := divisible8(float64(in * st[0]))
			y, k := x, 0
			if exp != in {
				y = cba(fmt.Sprintf("%sblock.%d.", nm, k), y, exp, 1, 1, 1, true)
				k++
			}
			y = cba(fmt.Sprintf("%sblock.%d.", nm, k), y, exp, st[1], s, exp, true)
			y = f.b.se(fmt.Sprintf("%s%sblock.%d", f.pre, nm, k+1), y, OpArgs{Channels: max(1, in/4)})
			y = cba(fmt.Sprintf("%sblock.%d.", nm, k+2), y, out, 1, 1, 1, false)
			if s == 1 && in == out {
				y = f.b.dropPath(f.pre+nm+"stochastic_depth", y, sd*float64(id)/float64(total))
				y = f.b.add(f.pre+nm+"add", []int{y, x}, []string{"the block", "the shortcut"})
			}
			x = y
			id++
		}
		if si == 1 || si == 2 || si == 4 || si == 6 {
			feats = append(feats, x)
		}
		if len(feats) >= levels {
			break
		}
	}
	return feats
}

// efficientnet is torchvision's classifier: the encoder, features.8 (a
// 1x1 conv to four times the last stage's channels, batchnorm, silu),
// avgpool (to [C]), classifier.0 (dropout) and classifier.1 (dense).
func (f *fam) efficientnet(x int, cfg effnetCfg) int {
	in, _ := f.b.shape(x)
	if !f.b.spatial(f.c.Name, in) {
		return -1
	}
	feats := f.effnetEncoder(x, cfg, "", argFloat(f.c, "drop_path", 0.2), 5)
	x = feats[len(feats)-1]
	last := 4 * divisible8(320*cfg.width)
	x = f.conv("features.8.0", x, last, 1, 1, 0, 1, 1, false)
	x = f.bn("features.8.1", x)
	x = f.act("features.8.2", "silu", x)
	x = f.b.gap(f.pre+"avgpool", x, false)
	x = f.b.dropout(f.pre+"classifier.0", x, argFloat(f.c, "dropout", cfg.dropout))
	return f.dense("classifier.1", x, argInt(f.c, "classes", 1000))
}
