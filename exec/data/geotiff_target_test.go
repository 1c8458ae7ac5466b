package data

import (
	"os"
	"path/filepath"
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
	writeFile(t, dir, "cut.tif", full[:len(full)/2])
	_, err = Open(source(t, `source s geotiff { path "scene.tif"  target "cut.tif" }`), WithBase(dir))
	wantErr(t, err, "cut.tif: ", "(is the file truncated or corrupt?)")
}

// ...and here the one-band view itself: the Landsat scene cut in half.
func TestGeoTIFFTruncatedLandsatTarget(t *testing.T) {
	needFiles(t, "data/L7_ETMs.tif")
	full, err := os.ReadFile(filepath.Join(repoRoot, "data/L7_ETMs.tif"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, dir, "half.tif", full[:len(full)/2])
	scene, err := filepath.Abs(filepath.Join(repoRoot, "data/L7_ETMs.tif"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(source(t, `source s geotiff { path "`+scene+`"  target "half.tif" }`), WithBase(dir))
	wantErr(t, err, "half.tif: ", "(is the file truncated or corrupt?)")
}
