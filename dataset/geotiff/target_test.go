package geotiff

import (
	"math"
	"os"
	"path/filepath"
	"pipe/dataset/internal/datatest"
	"pipe/internal/progtest"
	"testing"
)

// A target raster cut short says so, as a scene cut short does, whichever
// step of reading it fails at: here the warp (a one-band view of a
// three-band file)...
func TestGeoTIFFTruncatedTarget(t *testing.T) {
	dir := geoFixture(t)
	full, err := os.ReadFile(filepath.Join(dir, "scene.tif")) // three bands, uncompressed
	if err != nil {
		t.Fatal(err)
	}
	datatest.WriteFile(t, dir, "cut.tif", full[:len(full)/2])
	_, err = Open(progtest.Source(t, `source s geotiff { path "scene.tif"  target "cut.tif" }`), under(dir))
	datatest.WantErr(t, err, "cut.tif: ", "(is the file truncated or corrupt?)")
}

// ...and here the one-band view itself: the Landsat scene cut in half.
func TestGeoTIFFTruncatedLandsatTarget(t *testing.T) {
	needFiles(t, "data/L7_ETMs.tif")
	full, err := os.ReadFile(filepath.Join(repoRoot, "data/L7_ETMs.tif"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	datatest.WriteFile(t, dir, "half.tif", full[:len(full)/2])
	scene, err := filepath.Abs(filepath.Join(repoRoot, "data/L7_ETMs.tif"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(progtest.Source(t, `source s geotiff { path "`+scene+`"  target "half.tif" }`), under(dir))
	datatest.WantErr(t, err, "half.tif: ", "(is the file truncated or corrupt?)")
}

// The target's statistics are over the valid pixels the training tiles
// cover, each counted once however many tiles overlap it; y itself is
// left in the target's units.
func TestGeoTIFFTargetNorm(t *testing.T) {
	dir := geoFixture(t)
	for _, mode := range []string{"", "target_normalize standard", "target_normalize none"} {
		r, err := Open(progtest.Source(t, `source s geotiff { path "scene.tif"  target "target.tif"  tile 8x8 stride 4  split 0.7 seed 2  `+mode+` }`), under(dir))
		if err != nil {
			t.Fatal(err)
		}
		tr, _, _ := r.Parts()
		got, standard := r.TargetNorm()
		if standard != (mode != "target_normalize none") {
			t.Errorf("%q: standardise %v", mode, standard)
		}
		// By hand: the union of the training tiles' valid pixels.
		seen := map[[2]int]bool{}
		var n, s, ss float64
		x, y, m := make([]float32, 3*64), make([]float32, 64), make([]float32, 64)
		for _, j := range tr {
			w := r.Tile(j)
			if err := r.Read(j, x, y, m); err != nil {
				t.Fatal(err)
			}
			for p := range 64 {
				at := [2]int{w.X + p%8, w.Y + p/8}
				if m[p] == 0 || seen[at] {
					continue
				}
				seen[at] = true
				v := float64(y[p])
				n, s, ss = n+1, s+v, ss+v*v
			}
		}
		mean := s / n
		std := math.Sqrt(ss/n - mean*mean)
		if len(got.Mean) != 1 || !near(got.Mean[0], mean, 1e-6) || !near(got.Std[0], std, 1e-6) {
			t.Errorf("%q: target norm %+v, want mean %v std %v over %v pixels", mode, got, mean, std, n)
		}
		// y is raw: the target's values, not standardised ones.
		if mean < 40 {
			t.Errorf("%q: the targets' mean is %v; the fixture's lie near 50 and above", mode, mean)
		}
		if r.Valid(6, 6) || !r.Valid(0, 0) || r.Valid(-1, 0) || r.Valid(sceneW, 0) {
			t.Errorf("Valid: hole %v, corner %v", r.Valid(6, 6), r.Valid(0, 0))
		}
		r.Close()
	}
}

// A split by blocks leaves no pixel in both parts.
func TestGeoTIFFSplitByBlocks(t *testing.T) {
	dir := geoFixture(t)
	r, err := Open(progtest.Source(t, `source s geotiff { path "scene.tif"  tile 8x8 stride 4  split 0.7 seed 5 blocks 16 }`), under(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tr, va, _ := r.Parts()
	if len(tr)+len(va)+r.Straddling() != r.Len() || r.Straddling() == 0 || len(va) == 0 {
		t.Fatalf("%d train + %d val + %d straddling of %d tiles", len(tr), len(va), r.Straddling(), r.Len())
	}
	tiles := make([]Window, r.Len())
	for i := range tiles {
		tiles[i] = r.Tile(i)
	}
	ct := cover(tiles, tr, sceneW, sceneH)
	cv := cover(tiles, va, sceneW, sceneH)
	for p := range ct {
		if ct[p] && cv[p] {
			t.Fatalf("pixel (%d, %d) is in both parts", p%sceneW, p/sceneW)
		}
	}
	_, err = Open(progtest.Source(t, `source s geotiff { path "scene.tif"  tile 8x8  split 0.7 blocks 4 }`), under(dir))
	datatest.WantErr(t, err, "blocks 4 are smaller than the 8x8 tiles")
}
