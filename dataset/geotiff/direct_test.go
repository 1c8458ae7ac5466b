//go:build cgo

package geotiff

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"pipe/dataset/internal/datatest"
	"pipe/internal/progtest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airbusgeo/godal"
)

// The raster of the direct reader's tests: not a multiple of any block
// size used, three bands, a hole of nodata 7 in band 2 only.
const (
	directW, directH = 600, 540
	directND         = 7
)

// directValue is band b's raw value at (x, y): textured (so that the
// predictor and the compressors have work), never 7 outside the hole.
func directValue(typ godal.DataType, b, x, y int) int {
	if b == 1 && x >= 250 && x < 270 && y >= 240 && y < 260 {
		return directND
	}
	h := uint32(x)*0x9E3779B1 ^ uint32(y)*0x85EBCA77 ^ uint32(b)*0xC2B2AE3D
	h ^= h >> 15
	if typ == godal.Byte {
		return 20 + (x+3*y+50*b+int(h&7))%200
	}
	return 100 + (7*x+13*y+1000*b+int(h&63))%60000
}

// directFile writes the raster as typ with GDAL's translate switches
// sw into dir/name and returns the name.
func directFile(t *testing.T, dir, name string, typ godal.DataType, sw []string) string {
	t.Helper()
	gdalInit()
	mem, err := godal.Create(godal.Memory, "", 3, typ, directW, directH)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	buf := make([]uint16, directW*directH)
	for b, band := range mem.Bands() {
		for y := range directH {
			for x := range directW {
				buf[y*directW+x] = uint16(directValue(typ, b, x, y))
			}
		}
		if err := band.Write(0, 0, buf, directW, directH); err != nil {
			t.Fatal(err)
		}
		if err := band.SetNoData(directND); err != nil {
			t.Fatal(err)
		}
	}
	out, err := mem.Translate(filepath.Join(dir, name), sw, godal.SkipWarnings)
	if err != nil {
		t.Fatalf("writing %s: %v", name, err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return name
}

// directLayouts are the layouts the tests write, with the translate
// switches for each.
var directLayouts = []struct {
	name string
	sw   []string
}{
	{"cog", []string{"-of", "COG", "-co", "BLOCKSIZE=256"}},
	{"tiled-band", []string{"-of", "GTiff", "-co", "TILED=YES", "-co", "BLOCKXSIZE=128", "-co", "BLOCKYSIZE=64", "-co", "INTERLEAVE=BAND"}},
	{"striped", []string{"-of", "GTiff"}},
	{"striped-band", []string{"-of", "GTiff", "-co", "INTERLEAVE=BAND", "-co", "BLOCKYSIZE=7"}},
}

// directWindows are windows read with ReadWindow besides the tiles:
// single pixels at the corners, across the blocks' seams, the whole
// raster.
var directWindows = []Window{
	{X: 0, Y: 0, W: 1, H: 1},
	{X: directW - 1, Y: directH - 1, W: 1, H: 1},
	{X: 255, Y: 63, W: 2, H: 2},
	{X: 127, Y: 250, W: 300, H: 30},
	{X: 512, Y: 512, W: 88, H: 28},
	{X: 0, Y: 0, W: directW, H: directH},
}

// TestGeoTIFFDirectMatches: for every compression, layout, predictor and
// type, the direct block reader gives exactly the values of GDAL's path,
// and it ran where it should and not where it should not.
func TestGeoTIFFDirectMatches(t *testing.T) {
	dir := t.TempDir()
	for _, comp := range []string{"NONE", "DEFLATE", "ZSTD", "LZW"} {
		for _, lay := range directLayouts {
			for _, pred := range []string{"1", "2"} {
				for _, typ := range []godal.DataType{godal.Byte, godal.UInt16} {
					name := fmt.Sprintf("%s-%s-p%s-%s.tif", strings.ToLower(comp), lay.name, pred, typ)
					// GDAL writes no predictor tag without compression, so
					// NONE with PREDICTOR=2 is a plain file.
					want := comp != "LZW"
					t.Run(name, func(t *testing.T) {
						sw := append([]string{"-co", "COMPRESS=" + comp, "-co", "PREDICTOR=" + pred}, lay.sw...)
						directFile(t, dir, name, typ, sw)
						for _, body := range []string{
							`tile 256x256`,
							`tile 90x100 stride 77`,
							`bands [3, 2]  tile 64x64 stride 50  normalize global`,
						} {
							compareDirect(t, dir, name, body, want)
						}
					})
				}
			}
		}
	}
}

// openBoth opens src under base twice: with the direct reader, and with
// it off (GDAL's path); both close when the test ends.
func openBoth(tb testing.TB, src, base string) (direct, gdal *Dataset) {
	tb.Helper()
	direct = openGDALPath(tb, src, base, true)
	gdal = openGDALPath(tb, src, base, false)
	return direct, gdal
}

// openGDALPath opens src under base with the direct reader on or off;
// it closes when the test ends.
func openGDALPath(tb testing.TB, src, base string, directOn bool) *Dataset {
	tb.Helper()
	keep := directTIFF
	directTIFF = directOn
	ds, err := Open(progtest.Source(tb, src), under(base))
	directTIFF = keep
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ds.Close() })
	return ds
}

// compareDirect reads every tile of the source and directWindows with
// the direct reader on and off, and compares the bits.
func compareDirect(t *testing.T, dir, name, body string, want bool) {
	t.Helper()
	src := fmt.Sprintf(`source s geotiff { path %q  %s }`, name, body)
	direct, gdal := openBoth(t, src, dir)
	dd, gd := direct, gdal
	if gd.direct != nil {
		t.Fatal("directTIFF = false did not turn the direct reader off")
	}
	if dd.lut == nil {
		t.Fatal("the fast path does not apply")
	}
	if (dd.direct != nil) != want {
		t.Fatalf("%s: the direct reader applies: %v, want %v", body, dd.direct != nil, want)
	}
	dx, _, _ := datatest.ReadAll(t, direct)
	gx, _, _ := datatest.ReadAll(t, gdal)
	zeros := 0
	for i := range dx {
		same(t, i, "x", dx[i], gx[i])
		for _, v := range dx[i] {
			if v == 0 {
				zeros++
			}
		}
	}
	if zeros == 0 && !strings.Contains(body, "256x256") {
		t.Errorf("%s: no tile has a nodata pixel: the test does not exercise nodata", body)
	}
	nb := len(dd.bands)
	for _, w := range directWindows {
		a, b := make([]float32, nb*w.W*w.H), make([]float32, nb*w.W*w.H)
		if err := dd.ReadWindow(w, a, nil, nil); err != nil {
			t.Fatal(err)
		}
		if err := gd.ReadWindow(w, b, nil, nil); err != nil {
			t.Fatal(err)
		}
		same(t, 0, fmt.Sprint("window ", w), a, b)
	}
	if want {
		if n := dd.direct.reads.Load(); n != int64(len(dx)+len(directWindows)) {
			t.Errorf("%s: the direct reader read %d windows, want all %d", body, n, len(dx)+len(directWindows))
		}
	}
}

// TestGeoTIFFDirectCorrupt: a damaged block is an error naming the file
// and the block, on the direct path, not a panic; a truncated file too.
func TestGeoTIFFDirectCorrupt(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, comp, layout string
		damage             func(path string, lay *tiffLayout) error
		want               []string
	}{
		{"garbage.tif", "DEFLATE", "cog", func(path string, lay *tiffLayout) error {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			junk := make([]byte, lay.counts[3])
			for i := range junk {
				junk[i] = byte(i*7 + 1)
			}
			_, err = f.WriteAt(junk, int64(lay.offsets[3]))
			return err
		}, []string{"garbage.tif", "tile 3 ", "DEFLATE"}},
		{"zstd.tif", "ZSTD", "cog", func(path string, lay *tiffLayout) error {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt(make([]byte, 16), int64(lay.offsets[4]))
			return err
		}, []string{"zstd.tif", "tile 4 ", "ZSTD"}},
		{"strip.tif", "DEFLATE", "striped", func(path string, lay *tiffLayout) error {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt(make([]byte, lay.counts[5]), int64(lay.offsets[5]))
			return err
		}, []string{"strip.tif", "strip 5 ", "DEFLATE"}},
		{"truncated.tif", "NONE", "striped", func(path string, lay *tiffLayout) error {
			return os.Truncate(path, int64(lay.offsets[len(lay.offsets)/2]))
		}, []string{"truncated.tif", "strip ", "truncated"}},
		{"truncated-cog.tif", "NONE", "cog", func(path string, lay *tiffLayout) error {
			return os.Truncate(path, int64(lay.offsets[len(lay.offsets)-1]+10))
		}, []string{"truncated-cog.tif", fmt.Sprintf("tile %d ", 8), "truncated"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sw := []string{"-co", "COMPRESS=" + c.comp}
			for _, l := range directLayouts {
				if l.name == c.layout {
					sw = append(sw, l.sw...)
				}
			}
			directFile(t, dir, c.name, godal.UInt16, sw)
			ds, err := Open(progtest.Source(t, fmt.Sprintf(`source s geotiff { path %q  tile 256x256 }`, c.name)), under(dir))
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			d := ds
			if d.direct == nil {
				t.Fatal("the direct reader does not apply")
			}
			if err := c.damage(filepath.Join(dir, c.name), d.direct.lay); err != nil {
				t.Fatal(err)
			}
			x := make([]float32, 3*directW*directH)
			err = d.ReadWindow(Window{X: 0, Y: 0, W: directW, H: directH}, x, nil, nil)
			if err == nil {
				t.Fatal("reading the damaged file succeeded")
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
		})
	}
}

// TestTIFFLayoutBigTIFF: the IFD walk reads a BigTIFF's layout as it
// reads the classic file's.
func TestTIFFLayoutBigTIFF(t *testing.T) {
	dir := t.TempDir()
	sw := []string{"-of", "GTiff", "-co", "TILED=YES", "-co", "COMPRESS=ZSTD"}
	directFile(t, dir, "classic.tif", godal.UInt16, sw)
	directFile(t, dir, "big.tif", godal.UInt16, append(sw, "-co", "BIGTIFF=YES"))
	lays := map[string]*tiffLayout{}
	for _, n := range []string{"classic.tif", "big.tif"} {
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		l, err := readTIFFLayout(f, fi.Size())
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		lays[n] = l
	}
	c, b := lays["classic.tif"], lays["big.tif"]
	if c.width != directW || c.height != directH || c.spp != 3 || c.bits != 16 || c.compression != 50000 || !c.tiled || c.bw != 256 {
		t.Errorf("classic: %+v", *c)
	}
	if b.width != c.width || b.height != c.height || b.bw != c.bw || b.bh != c.bh || b.spp != c.spp || len(b.offsets) != len(c.offsets) || b.compression != c.compression {
		t.Errorf("BigTIFF %+v differs from classic %+v", *b, *c)
	}
	for i := range c.counts {
		if b.counts[i] != c.counts[i] {
			t.Errorf("block %d: %d bytes in the BigTIFF, %d in the classic file", i, b.counts[i], c.counts[i])
		}
	}
	// And the BigTIFF reads directly, with GDAL's values.
	compareDirect(t, dir, "big.tif", `tile 90x100 stride 77`, true)
}

// TestGeoTIFFDirectAllocates: once a worker's buffers are made, a read
// on the direct path allocates nothing, aligned or not, compressed or
// not.
func TestGeoTIFFDirectAllocates(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, comp, layout string }{
		{"none-cog.tif", "NONE", "cog"},
		{"zstd-band.tif", "ZSTD", "tiled-band"},
		{"none-striped.tif", "NONE", "striped"},
		{"deflate-striped.tif", "DEFLATE", "striped"},
		{"zstd-striped-band.tif", "ZSTD", "striped-band"},
	} {
		sw := []string{"-co", "COMPRESS=" + c.comp}
		for _, l := range directLayouts {
			if l.name == c.layout {
				sw = append(sw, l.sw...)
			}
		}
		directFile(t, dir, c.name, godal.UInt16, sw)
		ds, err := Open(progtest.Source(t, fmt.Sprintf(`source s geotiff { path %q  tile 90x100 stride 77 }`, c.name)), under(dir))
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		if ds.direct == nil {
			t.Fatalf("%s: the direct reader does not apply", c.name)
		}
		x := make([]float32, 3*90*100)
		read := func() {
			for i := range ds.Len() {
				if err := ds.Read(i, x, nil, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		read() // the worker's buffers
		if a := testing.AllocsPerRun(3, read); a != 0 {
			t.Errorf("%s: %.0f allocations a pass of %d reads, want none", c.name, a, ds.Len())
		}
	}
}

// TestGeoTIFFDirectCacheConcurrent: workers reading the same compressed
// blocks at once, in different orders, through the shared block cache
// (at its least here, so that it evicts blocks others may still hold),
// get GDAL's values, tiles and strips; a striped file whose strips would
// not fit the bound keeps GDAL's path.
func TestGeoTIFFDirectCacheConcurrent(t *testing.T) {
	dir := t.TempDir()
	for _, l := range directLayouts {
		name := "zstd-" + l.name + ".tif"
		directFile(t, dir, name, godal.UInt16, append([]string{"-co", "COMPRESS=ZSTD", "-co", "PREDICTOR=2"}, l.sw...))
		src := fmt.Sprintf(`source s geotiff { path %q  tile 90x100 stride 37 }`, name)
		gdal := openGDALPath(t, src, dir, false)
		want, _, _ := datatest.ReadAll(t, gdal)
		keep := directCacheBytes
		directCacheBytes = 0 // the least the cache holds: two rows of windows
		ds, err := Open(progtest.Source(t, src), under(dir))
		directCacheBytes = keep
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		d := ds
		if d.direct == nil || d.direct.cache == nil {
			t.Fatalf("%s: the direct reader's block cache is not used", name)
		}
		if d.direct.cache.max >= directW*3*2*directH {
			t.Fatalf("%s: the cache holds %d bytes, the whole raster: nothing is evicted", name, d.direct.cache.max)
		}
		const workers = 4
		errs := make([]error, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				x := make([]float32, 3*90*100)
				for j := range ds.Len() {
					i := (j*(2*w+1) + w*5) % ds.Len()
					if err := ds.Read(i, x, nil, nil); err != nil {
						errs[w] = err
						return
					}
					for k := range x {
						if math.Float32bits(x[k]) != math.Float32bits(want[i][k]) {
							errs[w] = fmt.Errorf("worker %d, tile %d: x[%d] is %v, GDAL's path %v", w, i, k, x[k], want[i][k])
							return
						}
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if n := d.direct.reads.Load(); n != int64(workers*ds.Len()) {
			t.Errorf("%s: %d direct reads, want %d", name, n, workers*ds.Len())
		}

		if strings.HasPrefix(l.name, "tiled") || l.name == "cog" {
			continue
		}
		keep = directStripBytes
		directStripBytes = 100 * directW * 3 * 2 // fewer rows than two rows of tiles
		small, err := Open(progtest.Source(t, src), under(dir))
		directStripBytes = keep
		if err != nil {
			t.Fatal(err)
		}
		defer small.Close()
		if small.direct != nil {
			t.Errorf("%s: the direct reader applies with a strip cache too small for two rows of tiles", name)
		}
	}
}

// TestGeoTIFFDirectLandsat: the examples' Landsat scene (DEFLATE strips
// of three rows, six Byte bands) reads through the direct reader's
// strip cache, with the target, and gives GDAL's path's values.
func TestGeoTIFFDirectLandsat(t *testing.T) {
	needFiles(t, "data/L7_ETMs.tif", "data/olinda_dem_utm25s.tif")
	src := `source scene geotiff { path "data/L7_ETMs.tif"  target "data/olinda_dem_utm25s.tif"  tile 32x32 stride 16 }`
	direct, gdal := openBoth(t, src, repoRoot)
	d := direct
	if d.direct == nil || d.direct.cache == nil {
		t.Fatal("the direct reader's block cache does not read the scene")
	}
	dx, dy, dm := datatest.ReadAll(t, direct)
	gx, gy, gm := datatest.ReadAll(t, gdal)
	for i := range dx {
		same(t, i, "x", dx[i], gx[i])
		same(t, i, "y", dy[i], gy[i])
		same(t, i, "mask", dm[i], gm[i])
	}
	if n := d.direct.reads.Load(); n != int64(len(dx)) {
		t.Errorf("the direct reader read %d of %d tiles", n, len(dx))
	}
}

// TestGeoTIFFDirectFallback: a big-endian file keeps GDAL's path, and in
// a sparse file (blocks never written, offset 0) the windows touching a
// sparse block are GDAL's to read, the others the direct reader's; the
// values are GDAL's path's either way.
func TestGeoTIFFDirectFallback(t *testing.T) {
	dir := t.TempDir()
	directFile(t, dir, "big-endian.tif", godal.UInt16, []string{"-of", "GTiff", "-co", "TILED=YES", "-co", "ENDIANNESS=BIG"})
	compareDirect(t, dir, "big-endian.tif", `tile 90x100 stride 77`, false)

	// Sparse: a tiled file of 128x128 blocks where only the left half
	// of the raster is written.
	gdalInit()
	ds, err := godal.Create(godal.GTiff, filepath.Join(dir, "sparse.tif"), 3, godal.UInt16, directW, directH,
		godal.CreationOption("TILED=YES", "BLOCKXSIZE=128", "BLOCKYSIZE=128", "SPARSE_OK=TRUE", "COMPRESS=ZSTD"))
	if err != nil {
		t.Fatal(err)
	}
	const half = 256
	buf := make([]uint16, 3*half*directH)
	for b := range 3 {
		for y := range directH {
			for x := range half {
				buf[b*half*directH+y*half+x] = uint16(directValue(godal.UInt16, b, x, y))
			}
		}
	}
	if err := ds.Write(0, 0, buf, half, directH, godal.BandInterleaved()); err != nil {
		t.Fatal(err)
	}
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}
	src := `source s geotiff { path "sparse.tif"  tile 100x100 stride 100 }`
	direct, gdal := openBoth(t, src, dir)
	d := direct
	if d.direct == nil {
		t.Fatal("the direct reader does not apply to the sparse file")
	}
	sparse := 0
	for _, o := range d.direct.lay.offsets {
		if o == 0 {
			sparse++
		}
	}
	if sparse == 0 {
		t.Fatal("GDAL wrote every block: the file is not sparse")
	}
	dx, _, _ := datatest.ReadAll(t, direct)
	gx, _, _ := datatest.ReadAll(t, gdal)
	onDirect := 0
	for i := range dx {
		same(t, i, "x", dx[i], gx[i])
		if w := d.Tile(i); w.X+w.W <= half {
			onDirect++
		}
	}
	if n := d.direct.reads.Load(); n != int64(onDirect) {
		t.Errorf("the direct reader read %d windows, want the %d inside the written half", n, onDirect)
	}
}

// FuzzTIFFLayout: the IFD walk returns a layout or an error for any
// bytes, never panics, and a layout it returns has as many offsets as
// blocks. Seeded with GDAL's classic and BigTIFF files.
func FuzzTIFFLayout(f *testing.F) {
	dir := f.TempDir()
	gdalInit()
	for _, c := range []struct {
		name string
		co   []string
	}{
		{"classic.tif", []string{"TILED=YES", "BLOCKXSIZE=16", "BLOCKYSIZE=16"}},
		{"big.tif", []string{"BIGTIFF=YES"}},
	} {
		ds, err := godal.Create(godal.GTiff, filepath.Join(dir, c.name), 2, godal.UInt16, 40, 30, godal.CreationOption(c.co...))
		if err != nil {
			f.Fatal(err)
		}
		if err := ds.Close(); err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, c.name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		lay, err := readTIFFLayout(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		blocks := lay.nbx * lay.nby
		if lay.planar == 2 {
			blocks *= lay.spp
		}
		if len(lay.offsets) != blocks || len(lay.counts) != blocks {
			t.Errorf("%d offsets and %d counts for %d blocks", len(lay.offsets), len(lay.counts), blocks)
		}
	})
}

// BenchmarkGeoTIFFDirectOverlap reads overlapping windows (256x256,
// stride 128) of a COG of 512x512 blocks, uncompressed and ZSTD, so that
// each block serves nine windows, on the direct path and on GDAL's, in
// alternating passes; it reports both passes' windows per second and
// their ratio. The file fits in both caches, so after the first pass
// neither decodes. No test asserts on time.
func BenchmarkGeoTIFFDirectOverlap(b *testing.B) {
	for _, comp := range []string{"NONE", "ZSTD"} {
		b.Run(comp, func(b *testing.B) { benchOverlap(b, comp) })
	}
}

func benchOverlap(b *testing.B, comp string) {
	dir := b.TempDir()
	gdalInit()
	const w, h, nb = 2048, 2048, 12
	mem, err := godal.Create(godal.Memory, "", nb, godal.UInt16, w, h)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]uint16, w*h)
	for k, band := range mem.Bands() {
		for y := range h {
			for x := range w {
				buf[y*w+x] = uint16(directValue(godal.UInt16, k, x, y))
			}
		}
		if err := band.Write(0, 0, buf, w, h); err != nil {
			b.Fatal(err)
		}
	}
	out, err := mem.Translate(filepath.Join(dir, "z.tif"), []string{"-of", "COG", "-co", "BLOCKSIZE=512", "-co", "COMPRESS=" + comp})
	if err != nil {
		b.Fatal(err)
	}
	out.Close()
	mem.Close()
	src := `source s geotiff { path "z.tif"  tile 256x256 stride 128 }`
	direct, gdal := openBoth(b, src, dir)
	x := make([]float32, nb*256*256)
	pass := func(ds *Dataset) time.Duration {
		t0 := time.Now()
		for i := range ds.Len() {
			if err := ds.Read(i, x, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t0)
	}
	var td, tg time.Duration
	for b.Loop() {
		td += pass(direct)
		tg += pass(gdal)
	}
	n := float64(direct.Len() * b.N)
	b.ReportMetric(n/td.Seconds(), "windows/s-direct")
	b.ReportMetric(n/tg.Seconds(), "windows/s-gdal")
	b.ReportMetric(tg.Seconds()/td.Seconds(), "direct/gdal")
}
