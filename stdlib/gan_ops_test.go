package stdlib

import (
	"strings"
	"testing"

	"pipe/lang"
)

// TestGANOps checks the shapes, parameters, FLOPs and saved elements of
// leakyrelu, instancenorm and pixelshuffle on [8, 5, 6].
func TestGANOps(t *testing.T) {
	in := []int64{8, 5, 6}
	cases := []struct {
		layer   string
		args    lang.Args
		out     []int64
		params  int64
		flops   int64
		saved   int64
		keepsIn bool
	}{
		{"leakyrelu", lang.Args{"slope": fv(0.2)}, []int64{8, 5, 6}, 0, 2 * 240, 240, true},
		{"instancenorm", nil, []int64{8, 5, 6}, 0, 5 * 240, 240 + 16, true},
		{"instancenorm", lang.Args{"affine": bv(true)}, []int64{8, 5, 6}, 16, 5 * 240, 240 + 16, true},
		{"pixelshuffle", lang.Args{"factor": iv(2)}, []int64{2, 10, 12}, 0, 0, 0, false},
	}
	for _, c := range cases {
		g, ds := BuildGraph(oneCall(in, c.layer, c.args))
		if len(ds) > 0 {
			t.Fatalf("%s: %v", c.layer, ds)
		}
		n := g.Nodes[1]
		if !equalShape(n.Out, c.out) || n.Params != c.params || n.FLOPs != c.flops || n.Saved != c.saved {
			t.Errorf("%s %v: out %v params %d flops %d saved %d; want %v %d %d %d", c.layer, c.args,
				n.Out, n.Params, n.FLOPs, n.Saved, c.out, c.params, c.flops, c.saved)
		}
		if keeps := len(n.Keep) == 1 && n.Keep[0] == 0; keeps != c.keepsIn {
			t.Errorf("%s keeps %v", c.layer, n.Keep)
		}
	}
	if g, _ := BuildGraph(oneCall(in, "leakyrelu", nil)); g.Nodes[1].Args.Slope != 0.01 {
		t.Errorf("leakyrelu's default slope is %v, PyTorch's is 0.01", g.Nodes[1].Args.Slope)
	}
	_, ds := BuildGraph(oneCall([]int64{6, 4, 4}, "pixelshuffle", lang.Args{"factor": iv(2)}))
	if len(ds) != 1 || !strings.Contains(ds[0].Detail, "divide by 4") || !strings.Contains(ds[0].Detail, "conv 4") {
		t.Errorf("pixelshuffle of 6 channels by 2: %v", ds)
	}
	_, ds = BuildGraph(oneCall([]int64{16}, "instancenorm", nil))
	if len(ds) != 1 || !strings.Contains(ds[0].Summary, "needs an image") {
		t.Errorf("instancenorm of a vector: %v", ds)
	}
}
