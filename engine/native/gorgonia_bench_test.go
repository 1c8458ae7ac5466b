package native

import (
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"pipe/engine/native/internal/openblas"
)

// The same steps in gorgonia's own graph machinery (TapeMachine, its Adam
// solver, OpenBLAS with its two threads): the evidence behind this
// backend's design, quoted in doc.go. Cross-entropy is log-softmax times
// the one-hot targets, as gorgonia has no such op.

func gNode(g *G.ExprGraph, name string, shape []int, bound float64) *G.Node {
	n := 1
	for _, d := range shape {
		n *= d
	}
	r := rand.New(rand.NewPCG(1, uint64(n)))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((2*r.Float64() - 1) * bound)
	}
	t := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
	return G.NewTensor(g, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(t))
}

func must(n *G.Node, err error) *G.Node {
	if err != nil {
		panic(err)
	}
	return n
}

func gorgoniaStep(b *testing.B, build func(g *G.ExprGraph, x *G.Node) (*G.Node, G.Nodes), xShape []int, classes int) {
	useBLAS()
	openblas.SetThreads(2)
	defer openblas.SetThreads(1)
	g := G.NewGraph()
	batch := xShape[0]
	x := gNode(g, "x", xShape, 1)
	y := gNode(g, "y", []int{batch, classes}, 0)
	logits, params := build(g, x)
	logp := must(G.LogSoftMax(logits))
	loss := must(G.Neg(must(G.Mean(must(G.HadamardProd(logp, y))))))
	if _, err := G.Grad(loss, params...); err != nil {
		b.Fatal(err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(params...))
	defer vm.Close()
	solver := G.NewAdamSolver(G.WithLearnRate(1e-3))
	step := func() {
		if err := vm.RunAll(); err != nil {
			b.Fatal(err)
		}
		if err := solver.Step(G.NodesToValueGrads(params)); err != nil {
			b.Fatal(err)
		}
		vm.Reset()
	}
	for i := 0; i < 2; i++ {
		step()
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		step()
	}
}

func BenchmarkGorgoniaStepMLP(b *testing.B) {
	gorgoniaStep(b, func(g *G.ExprGraph, x *G.Node) (*G.Node, G.Nodes) {
		var params G.Nodes
		h := x
		in := 784
		for i, out := range []int{256, 128, 10} {
			w := gNode(g, "w"+string(rune('0'+i)), []int{in, out}, 0.05)
			bias := gNode(g, "b"+string(rune('0'+i)), []int{out}, 0.05)
			params = append(params, w, bias)
			h = must(G.BroadcastAdd(must(G.Mul(h, w)), bias, nil, []byte{0}))
			if out != 10 {
				h = must(G.Rectify(h))
			}
			in = out
		}
		return h, params
	}, []int{64, 784}, 10)
}

// BenchmarkGorgoniaStepCNN is the Fashion-MNIST CNN without its
// batchnorms and dropout (gorgonia's BatchNorm keeps per-batch state that
// does not fit a TapeMachine loop); conv, relu and max-pool dominate it.
func BenchmarkGorgoniaStepCNN(b *testing.B) {
	gorgoniaStep(b, func(g *G.ExprGraph, x *G.Node) (*G.Node, G.Nodes) {
		w1 := gNode(g, "w1", []int{32, 1, 3, 3}, 0.3)
		w2 := gNode(g, "w2", []int{64, 32, 3, 3}, 0.05)
		w3 := gNode(g, "w3", []int{3136, 128}, 0.02)
		b3 := gNode(g, "b3", []int{128}, 0.02)
		w4 := gNode(g, "w4", []int{128, 10}, 0.08)
		b4 := gNode(g, "b4", []int{10}, 0.08)
		h := must(G.Conv2d(x, w1, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
		h = must(G.MaxPool2D(must(G.Rectify(h)), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
		h = must(G.Conv2d(h, w2, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
		h = must(G.MaxPool2D(must(G.Rectify(h)), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
		h = must(G.Reshape(h, tensor.Shape{64, 3136}))
		h = must(G.Rectify(must(G.BroadcastAdd(must(G.Mul(h, w3)), b3, nil, []byte{0}))))
		h = must(G.BroadcastAdd(must(G.Mul(h, w4)), b4, nil, []byte{0}))
		return h, G.Nodes{w1, w2, w3, b3, w4, b4}
	}, []int{64, 1, 28, 28}, 10)
}

// BenchmarkStepFashionNoBN is this backend on the same network as
// BenchmarkGorgoniaStepCNN.
func BenchmarkStepFashionNoBN(b *testing.B) {
	g := graphOf(b, "input [1, 28, 28]\nconv 32 k3 pad1 bias false -> relu -> maxpool 2\nconv 64 k3 pad1 bias false -> relu -> maxpool 2\nflatten -> dense 128 -> relu -> dense 10")
	benchStep(b, g, 64, "cross_entropy", "adam", true)
}
