package native

import (
	"os"
	"strconv"
	"testing"

	"pipe/engine"
	"pipe/stdlib"
)

// The benchmarks time one optimizer step (zero the gradients, forward,
// loss, backward, update) of the three reference models, fused as the
// planner fuses them. PyTorch's numbers for the same models on the same
// machine are in doc.go; bench/ compares them as ratios.
//
//	CGO_LDFLAGS=-lopenblas go test ./engine/native -run NONE -bench Step

const benchMLP = "input [784]\ndense 256 -> relu -> dense 128 -> relu -> dense 10"

func benchStep(b *testing.B, g *stdlib.Graph, batch int, loss, opt string, fuse bool) {
	cfg := cfgOf(batch, loss, opt)
	// PIPE_BENCH_THREADS sets the pool's threads (default GOMAXPROCS),
	// so that GOMAXPROCS and the workers can differ.
	cfg.Threads, _ = strconv.Atoi(os.Getenv("PIPE_BENCH_THREADS"))
	if opt == "adamw" {
		cfg.Optimizer.WeightDecay = 0.01
	}
	if fuse {
		cfg.Fusion = fuseAll(g)
		cfg.Folds = foldsOf(g)
	}
	m := mustBuild(b, g, cfg)
	bt := randomBatch(m, batch, 1)
	step := func() {
		m.ZeroGrad()
		if _, err := m.TrainStep(bt, 1); err != nil {
			b.Fatal(err)
		}
		if err := m.Step(1e-3); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		step()
	}
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		step()
	}
	b.StopTimer()
	// The process's CPU time per step: on a machine shared with other
	// work it moves less than the wall time.
	b.ReportMetric(float64(cpuTime()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
	mem := m.Memory()
	b.ReportMetric(float64(mem.Arena)/(1<<20), "arena-MiB")
}

func BenchmarkStepMLP(b *testing.B) {
	benchStep(b, graphOf(b, benchMLP), 64, "cross_entropy", "adam", true)
}

func BenchmarkStepFashion(b *testing.B) {
	benchStep(b, exampleGraph(b, "fashion.pipe"), 64, "cross_entropy", "adam", true)
}

func BenchmarkStepFashionUnfused(b *testing.B) {
	benchStep(b, exampleGraph(b, "fashion.pipe"), 64, "cross_entropy", "adam", false)
}

func BenchmarkStepUNet(b *testing.B) {
	benchStep(b, exampleGraph(b, "olinda.pipe"), 8, "mse", "adamw", true)
}

var _ engine.Model = (*model)(nil)

// BenchmarkStepUNetSmall is bench/models/unet_small.pipe, the U-Net of
// make bench's ratios (128×128, batch 8).
func BenchmarkStepUNetSmall(b *testing.B) {
	benchStep(b, exampleGraph(b, "../bench/models/unet_small.pipe"), 8, "mse", "adamw", true)
}

func BenchmarkStepViT(b *testing.B) {
	benchStep(b, exampleGraph(b, "vit_fashion.pipe"), 128, "cross_entropy", "adamw", true)
}
