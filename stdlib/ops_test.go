package stdlib

import (
	"testing"

	"pipe/lang"
)

// opsSource uses every op that holds tensors, with the arguments that
// change them (affine, bias, groups, terms, a volume).
const opsSource = `
pipeline ops
model a {
  input [3, 16, 16]
  conv 8 k3 pad1 -> instancenorm affine true -> leakyrelu 0.2 -> conv 8 k3 groups 8 pad1 -> batchnorm
  convtranspose 4 k2 s2 bias false -> instancenorm -> groupnorm 2 eps 1e-3 -> se ratio 2 -> sketched_conv 6 k3 pad1 terms 2 rank 3
  gap -> dense 12 -> lowrank_dense 5 terms 2 rank 3 -> sketched_dense 7 terms 2 rank 2 bias false -> layernorm
}
model b {
  input [3, 16, 16]
  patches 4 dim 16 -> class_token -> pos_embed -> attention heads 4 -> random_attention heads 2 features 5 -> mean_tokens
}
model c {
  input [2, 8, 8, 8]
  conv3d 4 k3 pad1 -> batchnorm -> groupnorm 2 -> convtranspose3d 3 -> groupnorm 1
}
`

// TestTensorsCountParams: the tensors each descriptor declares hold the
// node's Params as trainable values and its Buffers (plus batchnorm's
// running statistics) as buffers, under names unique in the graph.
func TestTensorsCountParams(t *testing.T) {
	f, ds := lang.Parse("ops.pipe", []byte(opsSource))
	p, cds := lang.Check(f, Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		t.Fatal(ds)
	}
	withTensors := map[string]bool{}
	for _, m := range p.Models {
		g, gds := BuildGraph(m)
		if gds.HasErrors() {
			t.Fatal(gds)
		}
		seen := map[string]bool{}
		for _, n := range g.Nodes {
			ts, ok := Tensors(n)
			if !ok {
				t.Errorf("%s: op %s has no descriptor", n.Name, n.Op)
			}
			var params, buffers int64
			for _, x := range ts {
				if seen[x.Name] {
					t.Errorf("%s declared twice", x.Name)
				}
				seen[x.Name] = true
				size := int64(1)
				for _, d := range x.Shape {
					size *= d
				}
				if x.Buffer {
					buffers += size
				} else {
					params += size
				}
			}
			want := n.Buffers
			if n.Op == "batchnorm" {
				want += n.Params
			}
			if params != n.Params || buffers != want {
				t.Errorf("%s (%s): %d parameters and %d buffer values declared; the node counts %d and %d", n.Name, n.Op, params, buffers, n.Params, want)
			}
			if len(ts) > 0 {
				withTensors[n.Op] = true
			}
		}
	}
	for _, op := range Ops() {
		if op.Tensors != nil && !withTensors[op.Name] {
			t.Errorf("op %s declares tensors that the test source does not use", op.Name)
		}
	}
}

// TestEveryLayerHasABuilder: each layer of the registry is some op's, and
// builds through its descriptor.
func TestEveryLayerHasABuilder(t *testing.T) {
	for _, l := range Schema().Layers() {
		if l.Family {
			continue
		}
		if lo := layerOps[l.Name]; lo == nil || lo.Spec != l || lo.build == nil {
			t.Errorf("layer %s has no descriptor with a build", l.Name)
		}
	}
}

// TestGroupnormRules: groupnorm keeps its shape on images and volumes,
// counts a scale and shift per channel and a mean and inverse deviation
// per group, and refuses vectors and groups that do not divide the
// channels.
func TestGroupnormRules(t *testing.T) {
	g, ds := BuildGraph(oneCall([]int64{6, 4, 5}, "groupnorm", lang.Args{"groups": iv(3)}))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	n := g.Nodes[1]
	if n.Op != "groupnorm" || !equalShape(n.Out, []int64{6, 4, 5}) || n.Params != 12 || n.Private != 6 || n.FLOPs != 5*120 || n.Args.Groups != 3 || n.Args.Eps != 1e-5 {
		t.Errorf("groupnorm node %+v", n)
	}
	if g, ds := BuildGraph(oneCall([]int64{4, 2, 3, 3}, "groupnorm", lang.Args{"groups": iv(2)})); ds.HasErrors() || !equalShape(g.OutShape(), []int64{4, 2, 3, 3}) {
		t.Errorf("volume: %v %v", g.OutShape(), ds)
	}
	for _, c := range []struct {
		in     []int64
		groups int64
		code   string
	}{
		{[]int64{6, 4, 4}, 4, "bad-arg"},
		{[]int64{6}, 2, "shape-mismatch"},
	} {
		_, ds := BuildGraph(oneCall(c.in, "groupnorm", lang.Args{"groups": iv(c.groups)}))
		if len(ds) != 1 || ds[0].Code != c.code {
			t.Errorf("groupnorm %d on %v: %v", c.groups, c.in, ds)
		}
	}
}

// TestSwishRules: silu, its alias swish and hardswish keep their shape and
// their input (autograd's backward reads it), at 5 FLOPs an element;
// swish builds a silu node.
func TestSwishRules(t *testing.T) {
	for _, layer := range []string{"silu", "swish", "hardswish"} {
		g, ds := BuildGraph(oneCall([]int64{4, 3, 5}, layer, lang.Args{}))
		if ds.HasErrors() {
			t.Fatal(ds)
		}
		n := g.Nodes[1]
		op := layer
		if layer == "swish" {
			op = "silu"
		}
		if n.Op != op || !equalShape(n.Out, []int64{4, 3, 5}) || n.FLOPs != 5*60 || len(n.Keep) != 1 || n.Keep[0] != 0 || n.Params != 0 {
			t.Errorf("%s node %+v", layer, n)
		}
	}
}

// TestSERules: se keeps its shape and its input, holds torchvision's fc1
// and fc2 (1x1 convs with bias) of max(1, C/ratio) or squeeze channels,
// and keeps 2C + 2S values a sample of its own.
func TestSERules(t *testing.T) {
	for _, c := range []struct {
		args lang.Args
		s    int64
	}{{lang.Args{}, 2}, {lang.Args{"ratio": iv(3)}, 2}, {lang.Args{"ratio": iv(16)}, 1}, {lang.Args{"squeeze": iv(5)}, 5}} {
		g, ds := BuildGraph(oneCall([]int64{8, 3, 5}, "se", c.args))
		if ds.HasErrors() {
			t.Fatal(ds)
		}
		n := g.Nodes[1]
		if n.Op != "se" || n.Args.Channels != c.s || !equalShape(n.Out, []int64{8, 3, 5}) || n.Params != 2*8*c.s+8+c.s ||
			n.Private != 2*(8+c.s) || len(n.Keep) != 1 || n.Keep[0] != 0 || n.FLOPs != 2*120+4*8*c.s+6*c.s+5*8 {
			t.Errorf("se %v: node %+v", c.args, n)
		}
		ts, _ := Tensors(n)
		want := [][]int64{{c.s, 8, 1, 1}, {c.s}, {8, c.s, 1, 1}, {8}}
		for i, name := range []string{"se1.fc1.weight", "se1.fc1.bias", "se1.fc2.weight", "se1.fc2.bias"} {
			if len(ts) != 4 || ts[i].Name != name || !equalShape(ts[i].Shape, want[i]) {
				t.Fatalf("se tensors %+v", ts)
			}
		}
	}
	if _, ds := BuildGraph(oneCall([]int64{8}, "se", lang.Args{})); len(ds) != 1 || ds[0].Code != "shape-mismatch" {
		t.Errorf("se on a vector: %v", ds)
	}
}

// TestDropPathRules: drop_path keeps its shape and a 4-byte factor per
// sample, nothing at p 0.
func TestDropPathRules(t *testing.T) {
	g, ds := BuildGraph(oneCall([]int64{4, 3, 5}, "drop_path", lang.Args{"p": fv(0.25)}))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	if n := g.Nodes[1]; n.Op != "drop_path" || n.Args.P != 0.25 || !equalShape(n.Out, []int64{4, 3, 5}) || n.SavedAux != 4 || n.FLOPs != 60 || len(n.Keep) != 0 {
		t.Errorf("drop_path node %+v", n)
	}
	g, _ = BuildGraph(oneCall([]int64{6}, "drop_path", lang.Args{"p": fv(0)}))
	if n := g.Nodes[1]; n.SavedAux != 0 || n.FLOPs != 0 {
		t.Errorf("drop_path 0 node %+v", n)
	}
}
