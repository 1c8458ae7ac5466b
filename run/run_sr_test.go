package run_test

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airbusgeo/godal"

	"pipe/engine/native"
	"pipe/run"
)

const srSrc = `pipeline sr
seed 2
source scene geotiff {
  path       "scene.tif"
  bands      [1, 2, 3]
  downsample 2
  tile       8x8 stride 4
  split      0.8 seed 1
}
model up {
  input [3, 4, 4]
  BODY
}
train { epochs 1  batch 8  optimizer adam lr 0.01  loss mse }
predict { source scene  write "out/sr.tif"  overlap 0.5 }
`

// TestPredictSuperResolution: a source that downsamples by 2 trained the
// model on inputs twice as coarse as the scene; predict feeds it the
// scene's own pixels and writes its outputs on a grid twice as fine,
// the pixel size halved, the origin and CRS kept, every pixel covered. A
// model whose output is not twice its input is refused with the reason.
func TestPredictSuperResolution(t *testing.T) {
	gt := [6]float64{290000, 30, 0, 9120000, 0, -30}
	const w, h = 30, 26
	band := func(b, x, y int) float64 { return math.Sin(float64(x*(b+1))/5) + math.Cos(float64(y)/(3+float64(b))) }

	j := newJob(t, strings.Replace(srSrc, "BODY", "conv 12 k3 pad1 -> pixelshuffle 2", 1))
	writeTIFF(t, filepath.Join(j.dir, "scene.tif"), w, h, 3, gt, band)
	res := mustRun(t, j, nil)
	if len(res.Predictions) != 1 || res.Predictions[0].Format != "geotiff" {
		t.Fatalf("predictions %+v", res.Predictions)
	}
	out, err := godal.Open(filepath.Join(j.dir, "out", "sr.tif"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	st := out.Structure()
	if st.SizeX != 2*w || st.SizeY != 2*h || st.NBands != 3 {
		t.Errorf("prediction is %dx%d with %d bands, want %dx%d with 3", st.SizeX, st.SizeY, st.NBands, 2*w, 2*h)
	}
	want := [6]float64{290000, 15, 0, 9120000, 0, -15}
	if got, err := out.GeoTransform(); err != nil || got != want {
		t.Errorf("geotransform %v (%v), want %v", got, err, want)
	}
	if sr := out.SpatialRef(); sr == nil {
		t.Error("the prediction has no CRS")
	}
	buf := make([]float32, 3*4*w*h)
	if err := out.Read(0, 0, buf, 2*w, 2*h); err != nil {
		t.Fatal(err)
	}
	for i, v := range buf {
		if math.IsNaN(float64(v)) {
			t.Fatalf("pixel %d is not covered by any window", i)
		}
	}

	// Predicting on a source that downsamples by 4 asks the model for a
	// 4 times finer grid, which its output, twice its input, cannot make.
	coarse := strings.Replace(srSrc, "BODY", "conv 12 k3 pad1 -> pixelshuffle 2", 1)
	coarse = strings.Replace(coarse, "predict { source scene", "source coarse geotiff { path \"scene.tif\"  bands [1, 2, 3]  downsample 4  tile 16x16 }\npredict { source coarse", 1)
	coarse = strings.Replace(coarse, "train { epochs 1", "train { source scene  epochs 1", 1)
	j = newJob(t, coarse)
	writeTIFF(t, filepath.Join(j.dir, "scene.tif"), w, h, 3, gt, band)
	_, ds := j.run(t, context.Background(), nil, run.Hooks{})
	d := findDiag(t, ds, run.CodePredict)
	if !strings.Contains(d.Detail, "grid 4 times finer") || !strings.Contains(d.Detail, "[K, 16, 16]") {
		t.Errorf("the refusal says %q", d.Detail)
	}
}

// TestPredictSuperResolutionValues: with a model that only repeats each
// pixel 2×2 (upsample 2, on the native engine), the prediction's pixel
// (2x+i, 2y+j) is the scene's pixel (x, y): predict reads the scene's
// own pixels, not a coarser copy, and puts each window's output where
// the window lies on the finer grid.
func TestPredictSuperResolutionValues(t *testing.T) {
	gt := [6]float64{290000, 30, 0, 9120000, 0, -30}
	const w, h = 30, 26
	band := func(b, x, y int) float64 { return float64(100*b + 7*x + 3*y) }
	src := strings.Replace(strings.Replace(srSrc, "BODY", "upsample 2", 1), "  split      0.8 seed 1\n", "  split      0.8 seed 1\n  normalize  none\n", 1)
	j := newJob(t, src)
	writeTIFF(t, filepath.Join(j.dir, "scene.tif"), w, h, 3, gt, band)
	_, ds := run.Run(context.Background(), j.plan, j.prog, run.Hooks{}, run.WithBackend(native.Backend{}),
		run.WithBase(j.dir), run.WithCheckpointDir(filepath.Join(j.dir, "ckpt")), run.WithThreads(1), run.WithMaxSteps(1))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	out, err := godal.Open(filepath.Join(j.dir, "out", "sr.tif"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	buf := make([]float32, 3*4*w*h)
	if err := out.Read(0, 0, buf, 2*w, 2*h, godal.BandInterleaved()); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for b := range 3 {
		for y := range 2 * h {
			for x := range 2 * w {
				if got, want := buf[(b*2*h+y)*2*w+x], float32(band(b, x/2, y/2)); math.Abs(float64(got-want)) > 1e-3 && bad < 5 {
					t.Errorf("band %d, pixel (%d, %d): %v, want the scene's (%d, %d), %v", b+1, x, y, got, x/2, y/2, want)
					bad++
				}
			}
		}
	}
}
