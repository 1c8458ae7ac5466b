package stdlib

import (
	"testing"

	"pipe/lang"
)

// TestVolumeLayers checks the 3-D layers' shapes, parameters, FLOPs and
// what they keep, each against a count written out by hand.
func TestVolumeLayers(t *testing.T) {
	cases := []struct {
		layer         string
		args          lang.Args
		in, out       []int64
		params, flops int64
		saved         int64 // elements kept per sample
		aux           int64
	}{
		// 2·(2·27)·8 per output voxel plus the bias, over 8·4·8·8 outputs.
		{"conv3d", lang.Args{"out": iv(8), "kernel": iv(3), "padding": iv(1)}, []int64{2, 4, 8, 8}, []int64{8, 4, 8, 8},
			2*27*8 + 8, 2*2*27*8*4*8*8 + 8*4*8*8, 2 * 4 * 8 * 8, 0},
		{"conv3d", lang.Args{"out": iv(3), "kernel": iv(3), "stride": iv(2), "bias": {Bool: false}}, []int64{2, 5, 9, 9}, []int64{3, 2, 4, 4},
			2 * 27 * 3, 2 * 2 * 27 * 3 * 2 * 4 * 4, 2 * 5 * 9 * 9, 0},
		// Each input voxel scatters out·k³ products.
		{"convtranspose3d", lang.Args{"out": iv(4)}, []int64{8, 2, 4, 4}, []int64{4, 4, 8, 8},
			8*4*8 + 4, 2*8*4*8*2*4*4 + 4*4*8*8, 8 * 2 * 4 * 4, 0},
		{"maxpool3d", lang.Args{}, []int64{4, 4, 8, 8}, []int64{4, 2, 4, 4}, 0, 8 * 4 * 2 * 4 * 4, 4 * 4 * 8 * 8, 8 * 4 * 2 * 4 * 4},
		{"maxpool3d", lang.Args{"size": iv(3), "stride": iv(1), "padding": iv(1)}, []int64{1, 3, 3, 3}, []int64{1, 3, 3, 3}, 0, 27 * 27, 27, 8 * 27},
		{"upsample3d", lang.Args{"mode": {Str: "trilinear"}}, []int64{2, 2, 3, 3}, []int64{2, 4, 6, 6}, 0, 15 * 2 * 4 * 6 * 6, 0, 0},
		{"upsample3d", lang.Args{"factor": iv(3)}, []int64{2, 2, 3, 3}, []int64{2, 6, 9, 9}, 0, 0, 0, 0},
		{"batchnorm", lang.Args{}, []int64{3, 2, 4, 4}, []int64{3, 2, 4, 4}, 6, 5 * 3 * 2 * 4 * 4, 3 * 2 * 4 * 4, 0},
		{"gap", lang.Args{}, []int64{3, 2, 4, 4}, []int64{3}, 0, 3 * 2 * 4 * 4, 3 * 2 * 4 * 4, 0},
	}
	for _, c := range cases {
		g, ds := BuildGraph(oneCall(c.in, c.layer, c.args))
		if len(ds) > 0 {
			t.Errorf("%s on %v: %v", c.layer, c.in, ds)
			continue
		}
		n := g.Nodes[g.Output]
		if !equalShape(n.Out, c.out) || n.Params != c.params || n.FLOPs != c.flops || n.Saved != c.saved || n.SavedAux != c.aux {
			t.Errorf("%s on %v: out %v params %d FLOPs %d saved %d aux %d; want %v %d %d %d %d",
				c.layer, c.in, n.Out, n.Params, n.FLOPs, n.Saved, n.SavedAux, c.out, c.params, c.flops, c.saved, c.aux)
		}
	}
}

// TestUnet3D: unet dims 3 keeps the volume's extent, and its parameters
// are the 3-D double convs', transposed convs' and head's, counted here
// level by level.
func TestUnet3D(t *testing.T) {
	const depth, width, out, cin = 3, 4, 2, 1
	g, ds := BuildGraph(oneCall([]int64{cin, 16, 32, 32}, "unet", lang.Args{"depth": iv(depth), "width": iv(width), "out": iv(out), "dims": iv(3)}))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	if o := g.OutShape(); !equalShape(o, []int64{out, 16, 32, 32}) {
		t.Fatalf("output %v", o)
	}
	double := func(a, b int64) int64 { return a*b*27 + 2*b + b*b*27 + 2*b }
	want := double(cin, width)
	for l := int64(1); l <= depth; l++ {
		want += double(width<<(l-1), width<<l)
	}
	for l := int64(depth); l >= 1; l-- {
		c := int64(width) << l
		want += c*(c/2)*8 + c/2 // transposed conv up
		want += double(c, c/2)  // the double conv after the concat
	}
	want += width*out + out
	if p := g.Params(); p != want {
		t.Errorf("unet dims 3: %d parameters, want %d", p, want)
	}
	ops := map[string]int{}
	for _, n := range g.Nodes {
		ops[n.Op]++
		if n.Op != "input" && len(n.Out) != 4 {
			t.Errorf("%s (%s) has output %v", n.Name, n.Op, n.Out)
		}
	}
	if ops["conv"] != 2*(2*depth+1)+1 || ops["maxpool"] != depth || ops["convtranspose"] != depth || ops["batchnorm"] != 2*(2*depth+1) {
		t.Errorf("ops %v", ops)
	}
	if g.Node(g.Output).Name != "outc.conv" {
		t.Errorf("head named %s", g.Node(g.Output).Name)
	}
}
