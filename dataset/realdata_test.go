package dataset

import (
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/airbusgeo/godal"

	"pipe/internal/progtest"
	"pipe/lang"
	"pipe/stdlib"
)

// The real data sets (make data) live in the repository's data folder;
// these tests skip when they are absent.
const repoRoot = ".."

func needFiles(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join(repoRoot, p)); err != nil {
			t.Skipf("%s absent (run make data)", p)
		}
	}
}

func TestFashionMNIST(t *testing.T) {
	needFiles(t, "data/fashion-mnist/train-images-idx3-ubyte.gz", "data/fashion-mnist/t10k-images-idx3-ubyte.gz")
	train, err := Open(progtest.Source(t, `source train idx { images "data/fashion-mnist/train-images-idx3-ubyte.gz"  labels "data/fashion-mnist/train-labels-idx1-ubyte.gz" }`), WithBase(repoRoot))
	if err != nil {
		t.Fatal(err)
	}
	test, err := Open(progtest.Source(t, `source test idx { images "data/fashion-mnist/t10k-images-idx3-ubyte.gz"  labels "data/fashion-mnist/t10k-labels-idx1-ubyte.gz" }`), WithBase(repoRoot))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("train %d x %v, test %d, classes %d", train.Len(), train.XShape(), test.Len(), train.Classes())
	if train.Len() != 60000 || test.Len() != 10000 || !slices.Equal(train.XShape(), []int64{1, 28, 28}) || train.Classes() != 10 || test.Classes() != 10 {
		t.Fatalf("train %d %v classes %d; test %d", train.Len(), train.XShape(), train.Classes(), test.Len())
	}
	// Every class has 1000 test images; pixels lie in [0, 1].
	l := NewLoader(test, LoaderOptions{BatchSize: 64, Workers: 2, Shuffle: true, Seed: 1})
	it := l.Epoch(0)
	defer it.Close()
	counts := make([]int, 10)
	var lo, hi float32 = 1, 0
	batches := 0
	for {
		b, err := it.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		batches++
		for _, y := range b.Y {
			counts[int(y)]++
		}
		lo, hi = min(lo, slices.Min(b.X)), max(hi, slices.Max(b.X))
		it.Release(b)
	}
	if batches != 157 || lo != 0 || hi != 1 {
		t.Fatalf("%d batches, x in [%v, %v]", batches, lo, hi)
	}
	for k, n := range counts {
		if n != 1000 {
			t.Fatalf("class %d: %d test images", k, n)
		}
	}
}

func TestLandsat(t *testing.T) {
	needFiles(t, "data/L7_ETMs.tif", "data/olinda_dem_utm25s.tif")
	before, _ := filepath.Glob(filepath.Join(repoRoot, "data", "*"))
	b := progtest.Source(t, `source scene geotiff {
  path      "data/L7_ETMs.tif"
  bands     [1, 2, 3, 4, 5, 6]
  target    "data/olinda_dem_utm25s.tif"
  tile      64x64 stride 48
  split     0.8 seed 7
  normalize per_band
  augment   [flip_h, flip_v, rot90]
}`)
	sp, err := OpenSplit(b, WithBase(repoRoot))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	r := sp.All.(Raster)
	g := r.Grid()
	nm := sp.All.(Normalized).Norm()
	t.Logf("scene %dx%d, %d tiles of 64x64 stride 48 (%d dropped), train %d, val %d", g.Width, g.Height, sp.All.Len(), r.Dropped(), sp.Train.Len(), sp.Val.Len())
	for k := range nm.Mean {
		t.Logf("band %d: mean %.3f std %.3f", k+1, nm.Mean[k], nm.Std[k])
	}
	t.Logf("target (DEM) valid on %.2f%% of the scene after warping", 100*r.Coverage())
	// Columns 0, 48, …, 240 and rows 0, 48, …, 288: 6 × 7 tiles.
	if sp.All.Len()+r.Dropped() != 42 || g.Width != 349 || g.Height != 352 {
		t.Fatalf("%d tiles + %d dropped on %dx%d", sp.All.Len(), r.Dropped(), g.Width, g.Height)
	}
	if r.Coverage() < 0.9 || r.Coverage() > 1 {
		t.Fatalf("DEM coverage %.4f", r.Coverage())
	}
	// gdalinfo -stats on a copy of the scene (it has no nodata).
	gdalMean := []float64{79.148, 67.575, 64.359, 59.235, 83.183, 59.975}
	gdalStd := []float64{14.694, 16.393, 21.587, 23.021, 38.492, 33.380}
	for k := range nm.Mean {
		if !near(nm.Mean[k], gdalMean[k], 6e-4) || !near(nm.Std[k], gdalStd[k], 6e-4) {
			t.Fatalf("band %d: mean %v std %v; gdalinfo says %v %v", k+1, nm.Mean[k], nm.Std[k], gdalMean[k], gdalStd[k])
		}
	}
	// The DEM's statistics: gdalinfo -stats gives min −1, max 88, mean 21.7.
	l := NewLoader(sp.Train, LoaderOptions{BatchSize: 8, Workers: 2, Shuffle: true, Seed: 7, Augment: Augmentations(b)})
	it := l.Epoch(0)
	defer it.Close()
	var sum, n float64
	lo, hi := math.Inf(1), math.Inf(-1)
	for {
		bt, err := it.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range bt.Mask {
			if m == 1 {
				v := float64(bt.Y[i])
				sum, n = sum+v, n+1
				lo, hi = min(lo, v), max(hi, v)
			}
		}
		it.Release(bt)
	}
	t.Logf("warped DEM over training tiles: min %.2f max %.2f mean %.2f", lo, hi, sum/n)
	if lo < -2 || hi > 89 || sum/n < 5 || sum/n > 50 {
		t.Fatalf("warped DEM: min %v max %v mean %v", lo, hi, sum/n)
	}

	// A prediction written on the scene's grid has its CRS and geotransform.
	out := filepath.Join(t.TempDir(), "pred.tif")
	if err := WritePrediction(out, g, 1, make([]float32, g.Width*g.Height)); err != nil {
		t.Fatal(err)
	}
	ds, err := godal.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	gt, _ := ds.GeoTransform()
	sr := ds.SpatialRef()
	defer sr.Close()
	if gt != g.GeoTransform || sr.AuthorityCode("") != "31985" {
		t.Fatalf("written grid %v EPSG:%s", gt, sr.AuthorityCode(""))
	}
	// Opening the scene wrote nothing next to it (no .aux.xml).
	after, _ := filepath.Glob(filepath.Join(repoRoot, "data", "*"))
	if !slices.Equal(before, after) {
		t.Fatalf("data/ changed: %v -> %v", before, after)
	}
}

// Every source of the examples opens when its data is present.
func TestExamplesOpen(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(repoRoot, "examples", "*.pipe"))
	if len(files) == 0 {
		t.Skip("no examples")
	}
	opened := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, ds := lang.Parse(f, src)
		if ds.HasErrors() {
			t.Logf("%s: %v (skipped: it does not parse)", f, ds)
			continue
		}
		p, ds := lang.Check(file, stdlib.Schema())
		if ds.HasErrors() {
			t.Logf("%s: %v (skipped: it does not check)", f, ds)
			continue
		}
		for _, b := range p.BlocksOf("source") {
			missing := ""
			for _, field := range []string{"path", "images", "labels", "target", "masks"} {
				if v := b.Field(field).First(); v != nil && v.Str != "" {
					if _, err := os.Stat(filepath.Join(repoRoot, v.Str)); err != nil {
						missing = v.Str
					}
				}
			}
			if missing != "" {
				t.Logf("%s: source %s: %s absent", filepath.Base(f), b.Name(), missing)
				continue
			}
			s, ds := stdlib.DecodeSource(b)
			if ds.HasErrors() {
				t.Fatalf("%s: %v", f, ds)
			}
			sp, err := OpenSplit(s, WithBase(repoRoot))
			if err != nil {
				t.Errorf("%s: source %s: %v", filepath.Base(f), b.Name(), err)
				continue
			}
			if shape, err := SampleShape(s, WithBase(repoRoot)); err != nil || shape != nil && !slices.Equal(shape, sp.All.XShape()) {
				t.Errorf("%s: source %s: SampleShape %v, %v; Open's XShape %v", filepath.Base(f), b.Name(), shape, err, sp.All.XShape())
			}
			val := 0
			if sp.Val != nil {
				val = sp.Val.Len()
			}
			t.Logf("%s: source %s: %d samples (%d train, %d val) x %v -> y %v, classes %d",
				filepath.Base(f), b.Name(), sp.All.Len(), sp.Train.Len(), val, sp.All.XShape(), sp.All.YShape(), sp.All.Classes())
			sp.Close()
			opened++
		}
	}
	if opened == 0 {
		t.Skip("no example's data is present")
	}
}
