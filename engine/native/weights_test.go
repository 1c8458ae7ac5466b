package native

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"pipe/engine"
	"pipe/engine/weights"
	"pipe/lang"
	"pipe/stdlib"
)

// TestStateIsWeightsInitial: for every model of every example this engine
// builds, the state it starts from is package weights' Initial, tensor
// for tensor in the same order and bit for bit, with the same counters,
// for each optimizer's buffers. The torch engine starts its workers from
// weights.Initial, so this is what lets a run move between the engines.
func TestStateIsWeightsInitial(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.pipe"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	built := 0
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, ds := lang.Parse(filepath.Base(path), src)
		p, cds := lang.Check(f, stdlib.Schema())
		if ds = append(ds, cds...); ds.HasErrors() {
			t.Fatalf("%s does not check:\n%v", path, ds)
		}
		for i, mod := range p.Models {
			g, gds := stdlib.BuildGraph(mod)
			if gds.HasErrors() {
				t.Fatalf("%s: %v", path, gds)
			}
			opt := []engine.Optimizer{{Kind: "adamw"}, {Kind: "sgd", Momentum: 0.9}, {Kind: "sgd"}}[i%3]
			cfg := engine.Config{Batch: 1, Seed: 11, Loss: engine.Loss{Kind: "mse"}, Optimizer: opt}
			got, err := InitialState(g, cfg)
			if errors.Is(err, engine.ErrUnsupported) {
				t.Logf("%s:%s: %v", filepath.Base(path), mod.Name, err)
				continue
			}
			if err != nil {
				t.Fatalf("%s:%s: %v", path, mod.Name, err)
			}
			want, err := weights.Initial(g, cfg.Seed, opt)
			if err != nil {
				t.Fatalf("%s:%s: %v", path, mod.Name, err)
			}
			built++
			if len(got.Tensors) != len(want.Tensors) {
				t.Errorf("%s:%s: %d tensors, weights.Initial %d", path, mod.Name, len(got.Tensors), len(want.Tensors))
				continue
			}
			for j, g := range got.Tensors {
				w := want.Tensors[j]
				if g.Name != w.Name || !slices.Equal(g.Shape, w.Shape) || !slices.Equal(g.Data, w.Data) {
					t.Errorf("%s:%s: tensor %d is %s %v, weights.Initial's %s %v (values equal %t)",
						path, mod.Name, j, g.Name, g.Shape, w.Name, w.Shape, slices.Equal(g.Data, w.Data))
					break
				}
			}
			if len(got.Counters) != len(want.Counters) {
				t.Errorf("%s:%s: counters %v, weights.Initial's %v", path, mod.Name, got.Counters, want.Counters)
			}
			for k, v := range want.Counters {
				if got.Counters[k] != v {
					t.Errorf("%s:%s: counter %s is %d, weights.Initial's %d", path, mod.Name, k, got.Counters[k], v)
				}
			}
		}
	}
	if built < 10 {
		t.Errorf("only %d example models built", built)
	}
}
