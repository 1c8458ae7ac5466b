package geotiff

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"pipe/dataset/internal/datatest"
	"pipe/internal/progtest"
	"slices"
	"sync"
	"testing"

	"github.com/airbusgeo/godal"
)

// writeTIFF writes a float32 GeoTIFF: bands × h × w values from f, with
// the geotransform, the CRS of epsg (none when 0) and nodata (none when
// NaN).
func writeTIFF(t testing.TB, path string, w, h, bands int, gt [6]float64, epsg int, nodata float64, f func(b, x, y int) float64, co ...string) {
	t.Helper()
	gdalInit()
	ds, err := godal.Create(godal.GTiff, path, bands, godal.Float32, w, h, godal.CreationOption(co...))
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.SetGeoTransform(gt); err != nil {
		t.Fatal(err)
	}
	if epsg != 0 {
		sr, err := godal.NewSpatialRefFromEPSG(epsg)
		if err != nil {
			t.Fatal(err)
		}
		if err := ds.SetSpatialRef(sr); err != nil {
			t.Fatal(err)
		}
		sr.Close()
	}
	buf := make([]float32, bands*w*h)
	for b := range bands {
		for y := range h {
			for x := range w {
				buf[b*w*h+y*w+x] = float32(f(b, x, y))
			}
		}
		if !math.IsNaN(nodata) {
			if err := ds.Bands()[b].SetNoData(nodata); err != nil {
				t.Fatal(err)
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

// The scene: 40 columns × 36 rows of 30 m in WGS 84 / UTM 25S, three
// bands, with a 3×3 nodata hole at columns and rows 5 to 7.
const (
	sceneW, sceneH = 40, 36
	sceneX0        = 300000.0
	sceneY0        = 9100000.0
	nodataV        = -9999.0
)

var sceneGT = [6]float64{sceneX0, 30, 0, sceneY0, 0, -30}

func sceneValue(b, x, y int) float64 {
	if x >= 5 && x <= 7 && y >= 5 && y <= 7 {
		return nodataV
	}
	return float64(10*b) + float64(x) + 0.5*float64(y)
}

// targetValue is a linear function of the UTM 25S coordinates, which
// bilinear resampling reproduces exactly.
func targetValue(e, nSouth float64) float64 { return 0.01*(e-sceneX0) + 0.02*(nSouth-sceneY0) + 50 }

// geoFixture writes the scene and a target in WGS 84 / UTM 25N (another
// CRS: northings 10,000 km lower) with 60 m pixels covering the scene's
// western 600 m (its first 20 columns).
func geoFixture(t *testing.T) string {
	dir := t.TempDir()
	writeTIFF(t, filepath.Join(dir, "scene.tif"), sceneW, sceneH, 3, sceneGT, 32725, nodataV, sceneValue)
	tgt := [6]float64{sceneX0, 60, 0, sceneY0 - 1e7, 0, -60}
	writeTIFF(t, filepath.Join(dir, "target.tif"), 10, 20, 1, tgt, 32625, math.NaN(), func(_, x, y int) float64 {
		e := sceneX0 + 60*(float64(x)+0.5)
		n := sceneY0 - 60*(float64(y)+0.5)
		return targetValue(e, n)
	})
	return dir
}

func TestGeoTIFF(t *testing.T) {
	dir := geoFixture(t)
	ds, err := Open(progtest.Source(t, `source s geotiff { path "scene.tif"  bands [1, 3]  target "target.tif"  tile 8x8 stride 8 }`), under(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	r := ds
	// 5×4 tiles of 8×8 fit; the 8 in columns 24 to 39 see no target.
	if ds.Len() != 12 || r.Dropped() != 8 {
		t.Fatalf("Len %d Dropped %d, want 12 and 8", ds.Len(), r.Dropped())
	}
	if !slices.Equal(ds.XShape(), []int64{2, 8, 8}) || !slices.Equal(ds.YShape(), []int64{1, 8, 8}) || !ds.HasMask() {
		t.Fatalf("XShape %v YShape %v HasMask %v", ds.XShape(), ds.YShape(), ds.HasMask())
	}
	// Per-band statistics over the valid pixels.
	nm := ds.Norm()
	for k, b := range []int{0, 2} {
		var s, ss, n float64
		for y := range sceneH {
			for x := range sceneW {
				if v := sceneValue(b, x, y); v != nodataV {
					s, ss, n = s+v, ss+v*v, n+1
				}
			}
		}
		mean := s / n
		std := math.Sqrt(ss/n - mean*mean)
		if !near(nm.Mean[k], mean, 1e-9) || !near(nm.Std[k], std, 1e-9) {
			t.Fatalf("band %d norm %v %v, want %v %v", b+1, nm.Mean[k], nm.Std[k], mean, std)
		}
	}
	g := r.Grid()
	if g.Width != sceneW || g.Height != sceneH || g.GeoTransform != sceneGT || g.Projection == "" {
		t.Fatalf("grid %+v", g)
	}
	// Coverage: columns 0 to 19 (or 20, by half a pixel) less the hole.
	if cov := r.Coverage(); cov < float64(20*sceneH-9)/(sceneW*sceneH) || cov > float64(21*sceneH-9)/(sceneW*sceneH) {
		t.Fatalf("coverage %v", cov)
	}
	xs, ys, ms := datatest.ReadAll(t, ds)
	for i := range ds.Len() {
		w := r.Tile(i)
		for ty := range 8 {
			for tx := range 8 {
				x, y, p := w.X+tx, w.Y+ty, ty*8+tx
				hole := sceneValue(0, x, y) == nodataV
				if hole {
					if ms[i][p] != 0 || xs[i][p] != 0 || xs[i][64+p] != 0 {
						t.Fatalf("tile %d (%d,%d) in the hole: mask %v x %v %v", i, x, y, ms[i][p], xs[i][p], xs[i][64+p])
					}
					continue
				}
				want := (sceneValue(2, x, y) - nm.Mean[1]) / nm.Std[1]
				if math.Abs(float64(xs[i][64+p])-want) > 1e-5 {
					t.Fatalf("tile %d (%d,%d) band 3 = %v, want %v", i, x, y, xs[i][64+p], want)
				}
				switch {
				case x <= 18:
					e, n := sceneX0+30*(float64(x)+0.5), sceneY0-30*(float64(y)+0.5)
					// Bilinear is exact for a linear function
					// between the target's pixel centres; within
					// half a target pixel of its edge GDAL clamps.
					interior := x >= 1 && y >= 1
					if ms[i][p] != 1 || interior && math.Abs(float64(ys[i][p])-targetValue(e, n)) > 1e-3 {
						t.Fatalf("tile %d (%d,%d): target %v mask %v, want %v", i, x, y, ys[i][p], ms[i][p], targetValue(e, n))
					}
				case x >= 21:
					if ms[i][p] != 0 || ys[i][p] != 0 {
						t.Fatalf("tile %d (%d,%d) outside the target: target %v mask %v", i, x, y, ys[i][p], ms[i][p])
					}
				}
			}
		}
	}
}

func TestGeoTIFFNoTarget(t *testing.T) {
	dir := geoFixture(t)
	ds, err := Open(progtest.Source(t, `source s geotiff { path "scene.tif"  tile 16x16 stride 12  normalize none }`), under(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	// Columns: 0, 12, 24 (36+16 > 40); rows: 0, 12 (24+16 > 36).
	if ds.Len() != 6 || ds.HasMask() || prod(ds.YShape()) != 0 || ds.XShape()[0] != 3 {
		t.Fatalf("Len %d HasMask %v YShape %v XShape %v", ds.Len(), ds.HasMask(), ds.YShape(), ds.XShape())
	}
	// A window reaching past the edge is padded with 0.
	x := make([]float32, 3*16*16)
	if err := ds.ReadWindow(Window{X: 30, Y: 30, W: 16, H: 16}, x, nil, nil); err != nil {
		t.Fatal(err)
	}
	if x[0] != float32(sceneValue(0, 30, 30)) || x[9] != float32(sceneValue(0, 39, 30)) || x[10] != 0 || x[6*16] != 0 {
		t.Fatalf("padded window: %v", x[:16])
	}
}

func TestGeoTIFFErrors(t *testing.T) {
	dir := geoFixture(t)
	writeTIFF(t, filepath.Join(dir, "nocrs.tif"), 10, 10, 1, [6]float64{sceneX0, 30, 0, sceneY0, 0, -30}, 0, math.NaN(), func(_, _, _ int) float64 { return 1 })
	writeTIFF(t, filepath.Join(dir, "far.tif"), 10, 10, 1, [6]float64{sceneX0 + 1e5, 30, 0, sceneY0, 0, -30}, 32725, math.NaN(), func(_, _, _ int) float64 { return 1 })
	// An uncompressed, striped file cut short.
	writeTIFF(t, filepath.Join(dir, "cut.tif"), 64, 64, 3, sceneGT, 32725, math.NaN(), sceneValue)
	full, err := os.ReadFile(filepath.Join(dir, "cut.tif"))
	if err != nil {
		t.Fatal(err)
	}
	datatest.WriteFile(t, dir, "cut.tif", full[:len(full)*6/10])
	datatest.WriteFile(t, dir, "junk.tif", []byte("II*\x00 this is not a TIFF"))
	cases := []struct{ src, want string }{
		{`path "missing.tif"`, "missing.tif: file not found"},
		{`path "scene.tif"  target "nocrs.tif"`, "nocrs.tif: the target has no CRS"},
		{`path "scene.tif"  target "far.tif"`, "scene.tif and far.tif do not overlap"},
		{`path "cut.tif"`, "cut.tif: reading rows"},
		{`path "junk.tif"`, "junk.tif: GDAL cannot open it"},
		{`path "scene.tif"  bands [1, 4]`, "scene.tif: band 4 does not exist (the file has bands 1 to 3)"},
		{`path "scene.tif"  tile 64x64`, "tiles of 64x64 do not fit in the 36x40 raster"},
		{`path "nocrs.tif"  target "scene.tif"`, "nocrs.tif: the scene has no CRS"},
	}
	for _, c := range cases {
		_, err := Open(progtest.Source(t, `source s geotiff { `+c.src+` }`), under(dir))
		datatest.WantErr(t, err, c.want)
	}
}

// Reading from several goroutines at once gives the same samples as
// reading alone: the handle pool keeps GDAL single-threaded per handle.
// (data's loader tests read a source through several workers.)
func TestGeoTIFFConcurrent(t *testing.T) {
	dir := geoFixture(t)
	ds, err := Open(progtest.Source(t, `source s geotiff { path "scene.tif"  target "target.tif"  tile 8x8 stride 2 }`), under(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	wx, wy, wm := datatest.ReadAll(t, ds)
	const workers = 4
	xn, yn := prod(ds.XShape()), prod(ds.YShape())
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x, y, m := make([]float32, xn), make([]float32, yn), make([]float32, yn)
			for i := w; i < ds.Len(); i += workers {
				if err := ds.Read(i, x, y, m); err != nil {
					errs[w] = err
					return
				}
				if !slices.Equal(x, wx[i]) || !slices.Equal(y, wy[i]) || !slices.Equal(m, wm[i]) {
					errs[w] = fmt.Errorf("tile %d differs from the one read alone", i)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A target with several bands contributes its band 1.
func TestGeoTIFFMultibandTarget(t *testing.T) {
	dir := geoFixture(t)
	writeTIFF(t, filepath.Join(dir, "two.tif"), sceneW, sceneH, 2, sceneGT, 32725, math.NaN(), func(b, x, y int) float64 {
		return float64(1000*b + x)
	})
	ds, err := Open(progtest.Source(t, `source s geotiff { path "scene.tif"  target "two.tif"  tile 8x8  normalize none }`), under(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	_, ys, ms := datatest.ReadAll(t, ds)
	w := ds.Tile(1) // columns 8 to 15
	for p := range 64 {
		if want := float32(w.X + p%8); ms[1][p] != 1 || ys[1][p] != want {
			t.Fatalf("pixel %d: target %v mask %v, want %v", p, ys[1][p], ms[1][p], want)
		}
	}
}
