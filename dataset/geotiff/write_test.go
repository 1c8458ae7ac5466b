package geotiff

import (
	"math"
	"os"
	"path/filepath"
	"pipe/internal/progtest"
	"testing"

	"github.com/airbusgeo/godal"
)

func TestWritePrediction(t *testing.T) {
	dir := geoFixture(t)
	ds, err := Open(progtest.Source(t, `source s geotiff { path "scene.tif"  tile 8x8 }`), under(dir))
	if err != nil {
		t.Fatal(err)
	}
	grid := ds.Grid()
	ds.Close()
	data := make([]float32, 2*grid.Width*grid.Height)
	for i := range data {
		data[i] = float32(i) / 7
	}
	data[5] = float32(math.NaN())
	out := filepath.Join(dir, "out", "pred.tif")
	if err := WritePrediction(out, grid, 2, data); err != nil {
		t.Fatal(err)
	}
	// Overwriting works too, and leaves no temporary file behind.
	if err := WritePrediction(out, grid, 2, data); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 1 {
		t.Fatalf("the output folder holds %d entries, want only pred.tif", len(ents))
	}
	if err := WritePrediction(out, grid, 3, data); err == nil {
		t.Fatal("a wrong length was written")
	}

	got, err := godal.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	st := got.Structure()
	if st.SizeX != grid.Width || st.SizeY != grid.Height || st.NBands != 2 || st.DataType != godal.Float32 {
		t.Fatalf("structure %+v", st)
	}
	if st.BlockSizeX != 256 || st.BlockSizeY != 256 {
		t.Fatalf("blocks %dx%d, want 256x256 tiles", st.BlockSizeX, st.BlockSizeY)
	}
	if c := got.Metadata("COMPRESSION", godal.Domain("IMAGE_STRUCTURE")); c != "DEFLATE" {
		t.Fatalf("compression %q", c)
	}
	gt, err := got.GeoTransform()
	if err != nil || gt != grid.GeoTransform {
		t.Fatalf("geotransform %v (%v), want %v", gt, err, grid.GeoTransform)
	}
	want, _ := godal.NewSpatialRefFromWKT(grid.Projection)
	defer want.Close()
	sr := got.SpatialRef()
	defer sr.Close()
	if !sr.IsSame(want) || sr.AuthorityCode("") != "32725" {
		t.Fatalf("CRS %s:%s, want EPSG:32725", sr.AuthorityName(""), sr.AuthorityCode(""))
	}
	back := make([]float32, len(data))
	if err := got.Read(0, 0, back, grid.Width, grid.Height, godal.BandInterleaved()); err != nil {
		t.Fatal(err)
	}
	for i := range data {
		if back[i] != data[i] && !(math.IsNaN(float64(back[i])) && math.IsNaN(float64(data[i]))) {
			t.Fatalf("value %d: %v, want %v", i, back[i], data[i])
		}
	}
}
