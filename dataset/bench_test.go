package dataset

import (
	"context"
	"io"
	"pipe/dataset/internal/datatest"
	"pipe/internal/progtest"
	"testing"
)

// BenchmarkLoaderIDX reads one epoch of 6000 MNIST-sized images from a
// gzipped IDX file per iteration, shuffled, in batches of 64 with two
// workers. It reports samples per second; no test asserts on time.
func BenchmarkLoaderIDX(b *testing.B) {
	dir := b.TempDir()
	const n = 6000
	pix := make([]byte, n*28*28)
	for i := range pix {
		pix[i] = byte(i * 13)
	}
	labels := make([]byte, n)
	for i := range labels {
		labels[i] = byte(i % 10)
	}
	datatest.WriteFile(b, dir, "img.gz", gz(idxBytes([]int{n, 28, 28}, pix)))
	datatest.WriteFile(b, dir, "lab.gz", gz(idxBytes([]int{n}, labels)))
	ds, err := Open(progtest.Source(b, `source s idx { images "img.gz"  labels "lab.gz" }`), WithBase(dir))
	if err != nil {
		b.Fatal(err)
	}
	l := NewLoader(ds, LoaderOptions{BatchSize: 64, Shuffle: true, Workers: 2, Augment: []string{"flip_h", "crop"}})
	b.ResetTimer()
	for e := 0; b.Loop(); e++ {
		it := l.Epoch(e)
		for {
			bt, err := it.Next(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			it.Release(bt)
		}
		it.Close()
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "samples/s")
}
