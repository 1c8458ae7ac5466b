package stdlib

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestZeroGradients names, on small models, the shifts whose gradient is
// zero in exact arithmetic, and none that a padded conv, an activation,
// a residual to the output, a grouped normalisation or a drawing dropout
// keeps alive.
func TestZeroGradients(t *testing.T) {
	for _, c := range []struct {
		name, input, body string
		want              []string
	}{
		{"conv bias before batchnorm", "[3, 8, 8]",
			"conv 8 k3 pad1 -> batchnorm -> relu -> gap -> dense 2",
			[]string{"conv1.bias"}},
		{"conv bias before instancenorm", "[3, 8, 8]",
			"conv 8 k3 pad1 -> instancenorm -> relu -> gap -> dense 2",
			[]string{"conv1.bias"}},
		{"dense bias before batchnorm", "[6]",
			"dense 8 -> batchnorm -> relu -> dense 2",
			[]string{"dense1.bias"}},
		{"batchnorm shift through a 1x1 conv", "[3, 8, 8]",
			"conv 8 k3 pad1 bias false -> batchnorm -> conv 8 k1 bias false -> batchnorm -> relu -> gap -> dense 2",
			[]string{"batchnorm1.bias"}},
		{"through an unpadded 3x3 conv and a dense", "[3, 8, 8]",
			"conv 8 k3 pad1 -> batchnorm -> conv 8 k3 -> batchnorm -> relu -> flatten -> dense 4 -> batchnorm -> relu -> dense 2",
			[]string{"conv1.bias", "batchnorm1.bias", "conv2.bias", "dense1.bias"}},
		{"groupnorm of one channel a group", "[3, 8, 8]",
			"conv 8 k3 pad1 -> groupnorm 8 -> relu -> gap -> dense 2",
			[]string{"conv1.bias"}},
		{"dropout at 0 is the identity", "[6]",
			"dense 8 -> dropout 0 -> batchnorm -> relu -> dense 2",
			[]string{"dense1.bias"}},
		// MBConv's projection: the sum of a residual stage reaches only 1x1
		// convs into batchnorms, so both blocks' shifts are dead.
		{"residual stage into a 1x1 conv", "[3, 8, 8]",
			"x = conv 8 k3 pad1 bias false -> batchnorm -> relu -> conv 8 k1 bias false -> batchnorm\n" +
				"  conv 8 k1 bias false -> batchnorm -> relu -> conv 8 k1 bias false -> batchnorm -> add x\n" +
				"  conv 8 k1 bias false -> batchnorm -> relu -> gap -> dense 2",
			[]string{"batchnorm2.bias", "batchnorm4.bias"}},

		{"padded 3x3 conv", "[3, 8, 8]",
			"conv 8 k3 pad1 bias false -> batchnorm -> conv 8 k3 pad1 bias false -> batchnorm -> relu -> gap -> dense 2",
			nil},
		{"activation between", "[3, 8, 8]",
			"conv 8 k3 pad1 -> relu -> batchnorm -> relu -> gap -> dense 2",
			nil},
		{"residual to an activation", "[3, 8, 8]",
			"x = conv 8 k3 pad1 bias false -> batchnorm\n" +
				"  conv 8 k1 bias false -> batchnorm -> add x -> relu -> gap -> dense 2",
			nil},
		{"a reader outside the normalisation", "[3, 8, 8]",
			"x = conv 8 k3 pad1\n  batchnorm -> add x -> relu -> gap -> dense 2",
			nil},
		{"groupnorm of two channels a group", "[3, 8, 8]",
			"conv 8 k3 pad1 -> groupnorm 4 -> relu -> gap -> dense 2",
			nil},
		{"layernorm over the bias's axis", "[6]",
			"dense 8 -> layernorm -> relu -> dense 2",
			nil},
		{"dropout that draws", "[6]",
			"dense 8 -> dropout 0.5 -> batchnorm -> relu -> dense 2",
			nil},
		{"the model's output", "[3, 8, 8]",
			"conv 8 k3 pad1 bias false -> batchnorm",
			nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := "pipeline p\nmodel m {\n  input " + c.input + "\n  " + c.body + "\n}\n"
			p, ds := checkSource(t, "z.pipe", []byte(src))
			if ds.HasErrors() || p == nil || len(p.Models) != 1 {
				t.Fatalf("does not check: %v\n%s", ds, src)
			}
			g, ds := BuildGraph(p.Models[0])
			if ds.HasErrors() {
				t.Fatal(ds)
			}
			if got := g.ZeroGradients(); !slices.Equal(got, c.want) {
				t.Errorf("ZeroGradients = [%s], want [%s]", strings.Join(got, " "), strings.Join(c.want, " "))
			}
		})
	}
}

// TestZeroGradientsEfficientNet: in efficientnet_b0 at drop_path 0 the dead
// shifts are the 16 projection batchnorms' (each block's last), whose sum
// reaches only 1x1 convs into batchnorms: the next block's expansion and
// features.8. PyTorch's float64 gradients of these (torchvision's model,
// 64x64, batch 2) measured 1e-16 to 2e-14, the next smallest 3.7e-2.
func TestZeroGradientsEfficientNet(t *testing.T) {
	src := "pipeline p\nmodel m {\n  input [3, 64, 64]\n  efficientnet_b0 classes 10  dropout 0  drop_path 0\n}\n"
	p, ds := checkSource(t, "e.pipe", []byte(src))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	g, ds := BuildGraph(p.Models[0])
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	var want []string
	for s, blocks := range []int{1, 2, 2, 3, 3, 4, 1} {
		for j := range blocks {
			last := 3 // expansion, depthwise, se, projection
			if s == 0 {
				last = 2 // no expansion
			}
			want = append(want, fmt.Sprintf("features.%d.%d.block.%d.1.bias", s+1, j, last))
		}
	}
	if got := g.ZeroGradients(); !slices.Equal(got, want) {
		t.Errorf("ZeroGradients =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// With drop_path each sample draws whether a block's branch is kept,
	// so only the shifts of each stage's first block, which has no
	// residual and reaches the next blocks as their shortcut, stay dead.
	src = strings.Replace(src, "drop_path 0", "drop_path 0.2", 1)
	p, _ = checkSource(t, "e.pipe", []byte(src))
	g, _ = BuildGraph(p.Models[0])
	var first []string
	for _, name := range want {
		if strings.Contains(name, ".0.block.") {
			first = append(first, name)
		}
	}
	if got := g.ZeroGradients(); !slices.Equal(got, first) {
		t.Errorf("with drop_path, ZeroGradients =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(first, "\n"))
	}
}
