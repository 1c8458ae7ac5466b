package native

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"pipe/dataset"
	"pipe/engine"
)

// BenchmarkEvalFashion times the Fashion-MNIST CNN's forward pass at
// batch 64 and 1 in fp32 and in int8 on each int8 kernel this CPU runs
// (bench/cmd/int8 compares them on the trained model, interleaved):
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
	type side struct {
		name string
		m    engine.Model
		k    qkernel
	}
	sides := []side{{"fp32", m, qpath}}
	for _, k := range qkernels(b) {
		sides = append(sides, side{"int8-" + strings.ReplaceAll(k.String(), " ", "-"), qm, k})
	}
	for _, n := range []int{64, 1} {
		x := &dataset.Batch{N: n, X: bt.X[:n*len(bt.X)/64]}
		for _, c := range sides {
			b.Run(fmt.Sprintf("b%d/%s", n, c.name), func(b *testing.B) {
				withQPath(c.k, func() {
					for b.Loop() {
						if _, err := c.m.Eval(x, out[:n*10]); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "samples/s")
			})
		}
	}
}

// BenchmarkInt8Gemm times the packed int8 product alone, one core, on
// each kernel this CPU runs, for a chunk of the fashion net's second conv
// (K = 32·3·3, 64 channels, 256 rows) and of a ResNet-18 stage-4 conv
// (K = 256·3·3, 256 channels, the 28 rows a 64 KiB chunk holds):
//
//	go test ./engine/native -run NONE -bench Int8Gemm
func BenchmarkInt8Gemm(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, sh := range []struct{ rows, co, k int }{{256, 64, 288}, {28, 256, 2304}} {
		q := make([]int8, sh.co*sh.k)
		for i := range q {
			q[i] = int8(r.IntN(255) - 127)
		}
		w := packWeights(q, make([]float32, sh.co), sh.co, sh.k)
		lda := w.lda()
		a := make([]uint8, sh.rows*lda)
		for i := range a {
			a[i] = uint8(r.IntN(256))
		}
		c := make([]int32, sh.rows*w.cop)
		for _, k := range qkernels(b) {
			b.Run(fmt.Sprintf("k%d-co%d/%v", sh.k, sh.co, k), func(b *testing.B) {
				withQPath(k, func() {
					for b.Loop() {
						w.gemm(a, lda, sh.rows, c, w.cop)
					}
				})
				b.ReportMetric(float64(sh.rows*sh.co*sh.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
}
