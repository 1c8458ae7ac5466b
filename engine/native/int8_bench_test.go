package native

import (
	"testing"

	"pipe/dataset"
	"pipe/engine"
)

// BenchmarkEvalFashion times the Fashion-MNIST CNN's forward pass at
// batch 64 in fp32 and in int8 (bench/cmd/int8 compares them on the
// trained model, interleaved):
//
//	CGO_LDFLAGS=-lopenblas go test ./engine/native -run NONE -bench EvalFashion
func BenchmarkEvalFashion(b *testing.B) {
	g := exampleGraph(b, "fashion.pipe")
	cfg := cfgOf(64, "cross_entropy", "adam")
	cfg.Fusion = fuseAll(g)
	cfg.Folds = foldsOf(g)
	m := mustBuild(b, g, cfg)
	bt := randomBatch(m, 64, 1)
	bt.Y = nil
	var calib []*dataset.Batch
	for i := 0; i < 2; i++ {
		c := randomBatch(m, 64, uint64(2+i))
		c.Y = nil
		calib = append(calib, c)
	}
	qm, _, err := m.QuantizeInt8(calib, engine.QuantOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer qm.Close()
	out := make([]float32, 64*10)
	for _, c := range []struct {
		name string
		m    engine.Model
	}{{"fp32", m}, {"int8", qm}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.m.Eval(bt, out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(64*b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
