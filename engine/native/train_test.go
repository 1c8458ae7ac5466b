package native

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pipe/dataset"
	"pipe/internal/progtest"
	"pipe/lang"
	"pipe/stdlib"
)

// TestFashionMNIST trains examples/fashion.pipe for one epoch on the real
// data (make data) and evaluates it on the test set: the proof that
// training works end to end. It takes about half a minute.
func TestFashionMNIST(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for an epoch")
	}
	root := filepath.Join("..", "..")
	for _, f := range []string{"train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz"} {
		if _, err := os.Stat(filepath.Join(root, "data", "fashion-mnist", f)); err != nil {
			t.Skipf("%s absent (run make data)", f)
		}
	}
	src, err := os.ReadFile(filepath.Join(root, "examples", "fashion.pipe"))
	if err != nil {
		t.Fatal(err)
	}
	f, ds := lang.Parse("fashion.pipe", src)
	prog, cds := lang.Check(f, stdlib.Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		t.Fatal(ds)
	}
	g, gds := stdlib.BuildGraph(prog.Models[0])
	if gds.HasErrors() {
		t.Fatal(gds)
	}
	open := func(name string) dataset.Dataset {
		d, err := dataset.Open(progtest.Decoded(t, prog).Spec.Source(name), dataset.WithBase(root))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	train, test := open("train"), open("test")

	const batch = 64
	cfg := cfgOf(batch, "cross_entropy", "adam")
	cfg.Fusion = fuseAll(g)
	cfg.Folds = foldsOf(g)
	m := mustBuild(t, g, cfg)

	ctx := context.Background()
	start := time.Now()
	it := dataset.NewLoader(train, dataset.LoaderOptions{BatchSize: batch, Shuffle: true, Seed: 1, Workers: 1}).Epoch(0)
	defer it.Close()
	var first, last float64
	steps := 0
	for {
		b, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		m.ZeroGrad()
		l, err := m.TrainStep(b, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Step(1e-3); err != nil {
			t.Fatal(err)
		}
		it.Release(b)
		if steps < 20 {
			first += l / 20
		}
		last = 0.98*last + 0.02*l
		steps++
	}
	trainTime := time.Since(start)

	start = time.Now()
	eit := dataset.NewLoader(test, dataset.LoaderOptions{BatchSize: 500, Workers: 1}).Epoch(0)
	defer eit.Close()
	out := make([]float32, 500*10)
	correct, total := 0, 0
	var loss float64
	for {
		b, err := eit.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		l, err := m.Eval(b, out[:b.N*10])
		if err != nil {
			t.Fatal(err)
		}
		loss += l * float64(b.N)
		for i := 0; i < b.N; i++ {
			best := 0
			for c := 1; c < 10; c++ {
				if out[i*10+c] > out[i*10+best] {
					best = c
				}
			}
			if best == int(b.Y[i]) {
				correct++
			}
		}
		total += b.N
		eit.Release(b)
	}
	acc := float64(correct) / float64(total)
	t.Logf("1 epoch: %d steps in %v (%.1f ms/step), loss %.3f → %.3f; test accuracy %.4f, loss %.4f (%d images, %v)",
		steps, trainTime.Round(time.Millisecond), float64(trainTime.Milliseconds())/float64(steps), first, last, acc, loss/float64(total), total, time.Since(start).Round(time.Millisecond))
	if acc <= 0.85 {
		t.Errorf("test accuracy %.4f after one epoch, want > 0.85", acc)
	}
}

// TestDeadShiftsStayPut: the shifts whose gradient is zero in exact
// arithmetic (Graph.ZeroGradients: a conv bias before a batchnorm, a
// batchnorm shift through a 1x1 conv into another, a dense bias before a
// batchnorm) get an exact zero gradient, fused or not, so Adam leaves
// them where they are; Adam's L2 weight decay still moves the nonzero
// ones, as in exact arithmetic.
func TestDeadShiftsStayPut(t *testing.T) {
	g := graphOf(t, "input [3, 8, 8]\nconv 8 k3 pad1 -> batchnorm -> conv 8 k1 bias false -> batchnorm -> relu -> gap -> dense 6 -> batchnorm -> relu -> dense 3")
	dead := g.ZeroGradients()
	if want := "conv1.bias batchnorm1.bias dense1.bias"; strings.Join(dead, " ") != want {
		t.Fatalf("ZeroGradients = %v, want %s", dead, want)
	}
	for _, c := range []struct {
		name  string
		fused bool
		wd    float64
	}{{"unfused", false, 0}, {"fused", true, 0}, {"weight decay", false, 0.1}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := cfgOf(4, "cross_entropy", "adam")
			cfg.Optimizer.WeightDecay = c.wd
			if c.fused {
				cfg.Fusion = fuseAll(g)
			}
			m := mustBuild(t, g, cfg)
			start := m.State()
			for step := range 4 {
				m.ZeroGrad()
				if _, err := m.TrainStep(randomBatch(m, 4, uint64(step+1)), 1); err != nil {
					t.Fatal(err)
				}
				for _, p := range m.params {
					if slices.Contains(dead, p.name) && slices.ContainsFunc(p.grad, func(v float32) bool { return v != 0 }) {
						t.Fatalf("step %d: %s has gradient %v", step+1, p.name, p.grad)
					}
				}
				if err := m.Step(1e-2); err != nil {
					t.Fatal(err)
				}
			}
			st := m.State()
			for _, x := range start.Tensors {
				if strings.HasPrefix(x.Name, "optimizer.") || strings.Contains(x.Name, "running") {
					continue
				}
				moved := !slices.Equal(x.Data, st.Lookup(x.Name).Data)
				decays := c.wd > 0 && slices.ContainsFunc(x.Data, func(v float32) bool { return v != 0 })
				if want := !slices.Contains(dead, x.Name) || decays; moved != want {
					t.Errorf("%s moved %t, want %t", x.Name, moved, want)
				}
			}
		})
	}
}
