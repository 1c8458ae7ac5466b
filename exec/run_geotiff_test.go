package exec_test

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airbusgeo/godal"
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
