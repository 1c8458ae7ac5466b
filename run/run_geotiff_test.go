package run_test

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airbusgeo/godal"

	"pipe/diag"
	"pipe/run"
)

// writeTIFF writes a float32 GeoTIFF in WGS 84 / UTM 25S whose band b at
// column x and row y holds f(b, x, y).
func writeTIFF(t *testing.T, path string, w, h, bands int, gt [6]float64, f func(b, x, y int) float64) {
	t.Helper()
	godal.RegisterAll()
	ds, err := godal.Create(godal.GTiff, path, bands, godal.Float32, w, h)
	if err != nil {
		t.Fatal(err)
	}
	sr, err := godal.NewSpatialRefFromEPSG(32725)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close()
	if err := ds.SetGeoTransform(gt); err != nil {
		t.Fatal(err)
	}
	if err := ds.SetSpatialRef(sr); err != nil {
		t.Fatal(err)
	}
	buf := make([]float32, bands*w*h)
	for b := range bands {
		for y := range h {
			for x := range w {
				buf[b*w*h+y*w+x] = float32(f(b, x, y))
			}
		}
	}
	if err := ds.Write(0, 0, buf, w, h, godal.BandInterleaved()); err != nil {
		t.Fatal(err)
	}
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestPredictGeoTIFFKeepsTheGrid(t *testing.T) {
	src := `pipeline geo
seed 2
source scene geotiff {
  path   "scene.tif"
  target "target.tif"
  tile   8x8 stride 4
  split  0.8 seed 1
}
model pix {
  input [2, 8, 8]
  conv 1 k1
}
train { epochs 3  batch 8  optimizer adam lr 0.05  loss mse  metrics [mae, rmse] }
predict { source scene  write "out/pred.tif"  overlap 0.25 }
`
	j := newJob(t, src)
	gt := [6]float64{290000, 30, 0, 9120000, 0, -30}
	const w, h = 30, 26
	band := func(b, x, y int) float64 { return math.Sin(float64(x*(b+1))/5) + math.Cos(float64(y)/(3+float64(b))) }
	writeTIFF(t, filepath.Join(j.dir, "scene.tif"), w, h, 2, gt, band)
	writeTIFF(t, filepath.Join(j.dir, "target.tif"), w, h, 1, gt, func(_, x, y int) float64 { return band(0, x, y) + 0.5*band(1, x, y) })

	res := mustRun(t, j, nil)
	if len(res.EpochResults) != 3 || res.EpochResults[2].Val == nil {
		t.Fatalf("epochs %+v", res.EpochResults)
	}
	if mae, ok := res.Final.Metric("mae"); !ok || math.IsNaN(mae) {
		t.Errorf("final mae %v (%v)", mae, ok)
	}
	if len(res.Predictions) != 1 || res.Predictions[0].Format != "geotiff" {
		t.Fatalf("predictions %+v", res.Predictions)
	}
	out, err := godal.Open(filepath.Join(j.dir, "out", "pred.tif"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	st := out.Structure()
	if st.SizeX != w || st.SizeY != h || st.NBands != 1 {
		t.Errorf("prediction is %dx%d with %d bands, want %dx%d with 1", st.SizeX, st.SizeY, st.NBands, w, h)
	}
	got, err := out.GeoTransform()
	if err != nil || got != gt {
		t.Errorf("geotransform %v (%v), want %v", got, err, gt)
	}
	if sr := out.SpatialRef(); sr == nil {
		t.Error("the prediction has no CRS")
	} else if wkt, _ := sr.WKT(); !strings.Contains(wkt, "UTM zone 25S") {
		t.Errorf("the prediction's CRS is %q", wkt)
	}
	buf := make([]float32, w*h)
	if err := out.Read(0, 0, buf, w, h); err != nil {
		t.Fatal(err)
	}
	for i, v := range buf {
		if math.IsNaN(float64(v)) {
			t.Fatalf("pixel %d is not covered by any window", i)
		}
	}
}

// readTIFF reads band 1 of a GeoTIFF.
func readTIFF(t *testing.T, path string) []float32 {
	t.Helper()
	ds, err := godal.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	st := ds.Structure()
	buf := make([]float32, st.SizeX*st.SizeY)
	if err := ds.Read(0, 0, buf, st.SizeX, st.SizeY); err != nil {
		t.Fatal(err)
	}
	return buf
}

// A target in metres near 500 is standardised for training, and scored,
// written and resumed in metres.
func TestGeoTIFFTargetStandardised(t *testing.T) {
	src := `pipeline geo
seed 2
source scene geotiff {
  path   "scene.tif"
  target "target.tif"
  tile   8x8 stride 4
  split  0.75 seed 1 blocks 12
  nodata -9999
}
model pix {
  input [2, 8, 8]
  conv 1 k1
}
train { epochs 4  batch 8  optimizer adam lr 0.05  loss mse  metrics [mae, rmse] }
predict { source scene  write "out/pred.tif"  overlap 0.5 }
`
	j := newJob(t, src)
	gt := [6]float64{290000, 30, 0, 9120000, 0, -30}
	const w, h = 30, 26
	hole := func(x, y int) bool { return x >= 20 && x <= 22 && y >= 3 && y <= 5 }
	band := func(b, x, y int) float64 { return math.Sin(float64(x*(b+1))/5) + math.Cos(float64(y)/(3+float64(b))) }
	writeTIFF(t, filepath.Join(j.dir, "scene.tif"), w, h, 2, gt, func(b, x, y int) float64 {
		if hole(x, y) {
			return -9999
		}
		return band(b, x, y)
	})
	target := func(shift float64) {
		writeTIFF(t, filepath.Join(j.dir, "target.tif"), w, h, 1, gt, func(_, x, y int) float64 {
			return shift + 500 + 20*(band(0, x, y)+0.5*band(1, x, y))
		})
	}
	target(0)
	res := mustRun(t, j, nil)

	s := res.TargetScaling
	if s == nil || len(s.Mean) != 1 || s.Mean[0] < 480 || s.Mean[0] > 520 || s.Std[0] < 5 || s.Std[0] > 40 {
		t.Fatalf("target scaling %v", s)
	}
	// The loss is in standardised units, the metrics in metres.
	f := res.Final
	rmse, _ := f.Metric("rmse")
	if f.Loss > 2 || len(f.Baseline) != 2 || f.Baseline[1].Name != "rmse" {
		t.Fatalf("final loss %v, baseline %v", f.Loss, f.Baseline)
	}
	if base := f.Baseline[1].Value; base < 3 || rmse >= base || math.Abs(rmse*rmse/(s.Std[0]*s.Std[0])-f.Loss) > 0.05*f.Loss+1e-3 {
		t.Errorf("rmse %v m, baseline %v m, loss %v (standardised): the rmse is not in metres or does not beat the mean", rmse, base, f.Loss)
	}
	// The prediction is in metres, and nodata where the scene is.
	pred := readTIFF(t, filepath.Join(j.dir, "out", "pred.tif"))
	var sum, n float64
	for i, v := range pred {
		x, y := i%w, i/w
		if hole(x, y) != math.IsNaN(float64(v)) {
			t.Fatalf("pixel (%d, %d) = %v", x, y, v)
		}
		if !hole(x, y) {
			sum, n = sum+float64(v), n+1
		}
	}
	if m := sum / n; m < 480 || m > 520 {
		t.Fatalf("the prediction's mean is %v, the target's about 500", m)
	}

	// A resumed run keeps the checkpoint's scaling when the target has
	// moved by 100 m: its model still predicts about 500.
	target(100)
	res2, ds := j.run(t, context.Background(), nil, run.Hooks{}, run.WithResume(""), run.WithSkipTrain())
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	if d := findDiag(t, ds, run.CodeResume); !strings.Contains(d.Summary, "target's scaling changed") {
		t.Errorf("resume warning %q", d.Summary)
	}
	if res2.TargetScaling == nil || res2.TargetScaling.Mean[0] != s.Mean[0] {
		t.Errorf("resumed scaling %v, the checkpoint's %v", res2.TargetScaling, s)
	}
	pred = readTIFF(t, filepath.Join(j.dir, "out", "pred.tif"))
	sum, n = 0, 0
	for i, v := range pred {
		if !hole(i%w, i/w) {
			sum, n = sum+float64(v), n+1
		}
	}
	if m := sum / n; m < 480 || m > 520 {
		t.Fatalf("the resumed prediction's mean is %v, the checkpoint's target about 500", m)
	}
}

// target_normalize none trains on the raw values.
func TestGeoTIFFTargetRaw(t *testing.T) {
	src := `source scene geotiff {
  path   "scene.tif"
  target "target.tif"
  target_normalize none
  tile   8x8 stride 4
  split  0.75 seed 1
}
model pix {
  input [1, 8, 8]
  conv 1 k1
}
train { epochs 1  batch 8  loss mse  metrics [rmse] }
`
	j := newJob(t, src)
	gt := [6]float64{290000, 30, 0, 9120000, 0, -30}
	writeTIFF(t, filepath.Join(j.dir, "scene.tif"), 16, 16, 1, gt, func(_, x, y int) float64 { return float64(x + y) })
	writeTIFF(t, filepath.Join(j.dir, "target.tif"), 16, 16, 1, gt, func(_, x, y int) float64 { return 300 + float64(x) })
	res := mustRun(t, j, nil)
	if res.TargetScaling != nil {
		t.Fatalf("target scaling %v under target_normalize none", res.TargetScaling)
	}
	// Raw targets near 300: the loss is the squared error in metres.
	rmse, _ := res.Final.Metric("rmse")
	if res.Final.Loss < 1000 || math.Abs(rmse*rmse-res.Final.Loss) > 1e-3*res.Final.Loss {
		t.Errorf("loss %v, rmse %v", res.Final.Loss, rmse)
	}
	if len(res.Final.Baseline) != 1 {
		t.Errorf("baseline %v", res.Final.Baseline)
	}
}

// TestPartialTargetWarns: a target raster that covers part of the scene
// leaves the tiles outside it out, and the run says how many it uses.
func TestPartialTargetWarns(t *testing.T) {
	src := `pipeline geo
source scene geotiff {
  path   "scene.tif"
  target "target.tif"
  tile   8x8 stride 8
}
model pix {
  input [1, 8, 8]
  conv 1 k1
}
train { epochs 1  batch 4  optimizer adam lr 0.05  loss mse }
`
	j := newJob(t, src)
	gt := [6]float64{290000, 30, 0, 9120000, 0, -30}
	writeTIFF(t, filepath.Join(j.dir, "scene.tif"), 48, 32, 1, gt, func(_, x, y int) float64 { return float64(x + y) })
	// The target covers the left third of the scene: 16 of 48 columns.
	writeTIFF(t, filepath.Join(j.dir, "target.tif"), 16, 32, 1, gt, func(_, x, y int) float64 { return float64(x) })
	res, ds := j.run(t, context.Background(), nil, run.Hooks{})
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	d := findDiag(t, ds, run.CodeData)
	if d.Severity != diag.Warning || !strings.Contains(d.Summary, "uses 8 of its 24 tiles") || !strings.Contains(d.Detail, "33%") {
		t.Errorf("%s: %s", d.Summary, d.Detail)
	}
	if res.Status != run.StatusCompleted {
		t.Errorf("status %s", res.Status)
	}
}
