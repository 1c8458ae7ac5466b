package geotiff

import (
	"fmt"
	"math"
	"path/filepath"
	"pipe/dataset/internal/datatest"
	"pipe/internal/progtest"
	"runtime"
	"strings"
	"testing"

	"github.com/airbusgeo/godal"
)

// intFixture writes the scene of geoFixture as integers (type "UInt16" or
// "Byte"), with nodata 7 where the float scene has its hole, and the
// target beside it; it returns the folder.
func intFixture(t *testing.T, typ string) string {
	dir := geoFixture(t)
	writeTIFF(t, filepath.Join(dir, "f.tif"), sceneW, sceneH, 3, sceneGT, 32725, 7, func(b, x, y int) float64 {
		if v := sceneValue(b, x, y); v != nodataV {
			return 10 + 3*v
		}
		return 7
	})
	src, err := godal.Open(filepath.Join(dir, "f.tif"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out, err := src.Translate(filepath.Join(dir, "int.tif"), []string{"-ot", typ, "-a_nodata", "7"})
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestGeoTIFFFastPathMatches: the tables of the fast path give the same
// bits as readWindow's float64 arithmetic, with nodata, with a target,
// under every normalisation, for UInt16 and Byte files.
func TestGeoTIFFFastPathMatches(t *testing.T) {
	for _, typ := range []string{"UInt16", "Byte"} {
		dir := intFixture(t, typ)
		for _, body := range []string{
			`bands [1, 3]  target "target.tif"  tile 8x8 stride 4`,
			`tile 8x8 stride 4  normalize none`,
			`tile 16x16 stride 4  normalize global  nodata 40`,
			`tile 8x8 stride 2`,
			`tile 16x16 stride 4  strips`,
		} {
			t.Run(typ+" "+body, func(t *testing.T) {
				if b, ok := strings.CutSuffix(body, "  strips"); ok {
					// Strips of 3 rows of 3 bands: 16 rows are 6 strips, the last of 1 row.
					defer func(v int) { fastStripValues = v }(fastStripValues)
					fastStripValues = 3 * 3 * 16
					body = b
				}
				src := fmt.Sprintf(`source s geotiff { path "int.tif"  %s }`, body)
				fast, err := Open(progtest.Source(t, src), under(dir))
				if err != nil {
					t.Fatal(err)
				}
				defer fast.Close()
				slow, err := Open(progtest.Source(t, src), under(dir))
				if err != nil {
					t.Fatal(err)
				}
				defer slow.Close()
				if fast.lut == nil {
					t.Fatal("the fast path does not apply to a file of " + typ)
				}
				slow.lut = nil
				fx, fy, fm := datatest.ReadAll(t, fast)
				sx, sy, sm := datatest.ReadAll(t, slow)
				zeros := 0
				for i := range fx {
					same(t, i, "x", fx[i], sx[i])
					same(t, i, "y", fy[i], sy[i])
					same(t, i, "mask", fm[i], sm[i])
					for _, v := range fx[i] {
						if v == 0 {
							zeros++
						}
					}
				}
				if zeros == 0 {
					t.Error("no tile has a nodata pixel (zeroed): the fixture does not exercise nodata")
				}
			})
		}
	}
}

func same(t *testing.T, i int, what string, a, b []float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("tile %d: %s has %d values on the fast path, %d on the old one", i, what, len(a), len(b))
	}
	for j := range a {
		if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
			t.Fatalf("tile %d: %s[%d] is %v on the fast path, %v on the old one", i, what, j, a[j], b[j])
		}
	}
}

// TestGeoTIFFFastPathAllocates: a read on the fast path allocates no
// buffer of the tile's size (the old path allocated one per tile).
func TestGeoTIFFFastPathAllocates(t *testing.T) {
	dir := intFixture(t, "UInt16")
	ds, err := Open(progtest.Source(t, `source s geotiff { path "int.tif"  tile 32x32 stride 4 }`), under(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	x := make([]float32, 3*32*32)
	perRead := func() float64 {
		for i := range ds.Len() { // warm the pools
			if err := ds.Read(i, x, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		const n = 200
		for i := range n {
			if err := ds.Read(i%ds.Len(), x, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&m1)
		return float64(m1.TotalAlloc-m0.TotalAlloc) / n
	}
	fast := perRead()
	ds.lut = nil
	old := perRead()
	t.Logf("bytes allocated per read: fast path %.0f, old path %.0f", fast, old)
	if fast >= 32*32 || !(fast < old) {
		t.Errorf("the fast path allocates %.0f bytes a read (the old one %.0f): want less than the tile's %d pixels", fast, old, 32*32)
	}
}
