package dataset

import (
	"context"
	"io"
	"strings"
	"testing"

	"pipe/internal/progtest"
)

// A batch gathered by index from the device form, each byte looked up in
// its table, is the loader's batch bit for bit, in the same order, for
// the training part of a split source with standard normalisation.
func TestDeviceSamplesGatherTheLoadersBatches(t *testing.T) {
	dir, _, _ := idxFixture(t, 20, 4, 3)
	b := progtest.Source(t, `source s idx { images "img.gz"  labels "lab"  normalize standard  split 0.7 seed 3 }`)
	sp, err := OpenSplit(b, WithBase(dir))
	if err != nil {
		t.Fatal(err)
	}
	r, err := DeviceSamples(sp.Train)
	if err != nil {
		t.Fatal(err)
	}
	if r.N() != 20 || r.Per != 12 {
		t.Fatalf("device samples: %d of %d bytes, want the whole file's 20 of 12", r.N(), r.Per)
	}
	opt := LoaderOptions{BatchSize: 4, Shuffle: true, Seed: 9}
	host := NewLoader(sp.Train, opt).Epoch(1)
	defer host.Close()
	opt.IndicesOnly = true
	dev := NewLoader(sp.Train, opt).Epoch(1)
	defer dev.Close()
	batches := 0
	for {
		hb, err := host.Next(context.Background())
		db, derr := dev.Next(context.Background())
		if err == io.EOF && derr == io.EOF {
			break
		}
		if err != nil || derr != nil {
			t.Fatal(err, derr)
		}
		if db.N != hb.N || len(db.X) != 0 || len(db.Indices) != db.N {
			t.Fatalf("indices-only batch: N %d (host %d), %d inputs, %d indices", db.N, hb.N, len(db.X), len(db.Indices))
		}
		for j, i := range db.Indices {
			if hb.Y[j] != float32(r.Labels[i]) {
				t.Fatalf("batch %d row %d: label %v, gathered %v", batches, j, hb.Y[j], r.Labels[i])
			}
			for k := range r.Per {
				if got := r.LUT[r.X[i*r.Per+k]]; got != hb.X[j*r.Per+k] {
					t.Fatalf("batch %d row %d value %d: gathered %v, loader %v", batches, j, k, got, hb.X[j*r.Per+k])
				}
			}
		}
		batches++
		host.Release(hb)
		dev.Release(db)
	}
	if batches != 4 { // 14 training samples in batches of 4
		t.Fatalf("%d batches, want 4", batches)
	}
}

func TestDeviceFormSaysWhyNot(t *testing.T) {
	dir, _, _ := idxFixture(t, 6, 4, 3)
	f, err := DeviceFormOf(progtest.Source(t, `source s idx { images "img.gz"  labels "lab" }`), WithBase(dir))
	if err != nil || f.Not != "" || f.Bytes != 6*12+6 {
		t.Fatalf("idx: %+v, %v; want 78 bytes", f, err)
	}
	f, err = DeviceFormOf(progtest.Source(t, `source s images { path "pics"  augment [flip_h] }`), WithBase(dir))
	if err != nil || !strings.Contains(f.Not, "augments") {
		t.Fatalf("augmenting source: %+v, %v", f, err)
	}
	f, err = DeviceFormOf(progtest.Source(t, `source s images { path "pics" }`), WithBase(dir))
	if err != nil || !strings.Contains(f.Not, "images source") {
		t.Fatalf("images source: %+v, %v", f, err)
	}
	if _, err := DeviceSamples(NewSubset(&csvLikeDataset{}, nil)); err == nil {
		t.Fatal("DeviceSamples took a dataset whose samples are not bytes")
	}
	l := NewLoader(&csvLikeDataset{}, LoaderOptions{BatchSize: 2, IndicesOnly: true, Augment: []string{"flip_h"}})
	if _, err := l.Epoch(0).Next(context.Background()); err == nil || !strings.Contains(err.Error(), "indices only") {
		t.Fatalf("indices only with augmentations: %v", err)
	}
}

type csvLikeDataset struct{}

func (csvLikeDataset) Len() int                                        { return 4 }
func (csvLikeDataset) XShape() []int64                                 { return []int64{1, 2, 2} }
func (csvLikeDataset) YShape() []int64                                 { return []int64{} }
func (csvLikeDataset) Classes() int                                    { return 2 }
func (csvLikeDataset) HasMask() bool                                   { return false }
func (csvLikeDataset) Read(int, []float32, []float32, []float32) error { return nil }
func (csvLikeDataset) Close() error                                    { return nil }
