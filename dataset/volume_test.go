package dataset

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"pipe/dataset/internal/datatest"
	"pipe/internal/progtest"
	"testing"
)

// ramp is n values a·i mod m, distinct enough to catch a misplaced chunk.
func ramp(n int, a, m float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(math.Mod(float64(a)*float64(i), float64(m)))
	}
	return out
}

// TestZarrRoundTrip writes arrays with every dtype and compressor, in
// chunks that do not divide the shape (edge chunks are stored whole and
// cropped), and reads them back exactly.
func TestZarrRoundTrip(t *testing.T) {
	shape, chunks := []int{3, 5, 7}, []int{2, 3, 4}
	for _, dt := range []string{"|u1", "<u2", "<f4"} {
		for _, comp := range []string{"", "gzip", "zlib", "zstd"} {
			t.Run(dt+comp, func(t *testing.T) {
				want := ramp(3*5*7, 37, 251)
				if dt == "<u2" {
					want = ramp(3*5*7, 997, 65521)
				}
				if dt == "<f4" {
					for i := range want {
						want[i] = want[i]*0.37 - 40
					}
				}
				dir := filepath.Join(t.TempDir(), "a.zarr")
				if err := WriteZarr(dir, shape, chunks, dt, comp, want); err != nil {
					t.Fatal(err)
				}
				files, _ := os.ReadDir(dir)
				if len(files) != 1+2*2*2 {
					t.Fatalf("%d files; want .zarray and 8 chunks", len(files))
				}
				a, err := ReadZarr(dir)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(a.Shape) != fmt.Sprint(shape) {
					t.Fatalf("shape %v", a.Shape)
				}
				for i := range want {
					if a.Data[i] != want[i] {
						t.Fatalf("value %d: %v, want %v", i, a.Data[i], want[i])
					}
				}
			})
		}
	}
}

// TestZarrMissingChunkAndErrors: a missing chunk is fill_value; blosc,
// big-endian, F order and v3 are refused with what to do.
func TestZarrMissingChunkAndErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a.zarr")
	if err := WriteZarr(dir, []int{4, 4}, []int{2, 2}, "|u1", "gzip", ramp(16, 1, 100)); err != nil {
		t.Fatal(err)
	}
	hdr, _ := os.ReadFile(filepath.Join(dir, ".zarray"))
	os.WriteFile(filepath.Join(dir, ".zarray"), bytes.Replace(hdr, []byte(`"fill_value": 0`), []byte(`"fill_value": 9`), 1), 0o644)
	os.Remove(filepath.Join(dir, "1.0"))
	a, err := ReadZarr(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Data[8] != 9 || a.Data[9] != 9 || a.Data[12] != 9 || a.Data[13] != 9 || a.Data[10] != 10 || a.Data[15] != 15 || a.Data[5] != 5 {
		t.Errorf("missing chunk not filled: %v", a.Data)
	}
	for _, c := range []struct{ from, to, want string }{
		{`"id": "gzip"`, `"id": "blosc", "cname": "lz4"`, "blosc-compressed (cname lz4)"},
		{`"|u1"`, `">u2"`, `dtype ">u2"`},
		{`"order": "C"`, `"order": "F"`, "C-order"},
		{`"zarr_format": 2`, `"zarr_format": 3`, "Zarr v2"},
	} {
		os.WriteFile(filepath.Join(dir, ".zarray"), bytes.Replace(hdr, []byte(c.from), []byte(c.to), 1), 0o644)
		_, err := ReadZarr(dir)
		datatest.WantErr(t, err, c.want)
	}
	_, err = ReadZarr(t.TempDir())
	datatest.WantErr(t, err, "no .zarray")
}

// TestZarrSourceWindows cuts windows with a stride from a [2, D, H, W]
// array, with a target array, and checks each window's values, the
// channel normalisation and the target statistics.
func TestZarrSourceWindows(t *testing.T) {
	dir := t.TempDir()
	const d, h, w = 4, 6, 5
	x := ramp(2*d*h*w, 1, 1e6)
	y := make([]float32, d*h*w)
	for i := range y {
		y[i] = float32(i % 3)
	}
	if err := WriteZarr(filepath.Join(dir, "x.zarr"), []int{2, d, h, w}, []int{1, 2, 4, 4}, "<f4", "zstd", x); err != nil {
		t.Fatal(err)
	}
	if err := WriteZarr(filepath.Join(dir, "y.zarr"), []int{d, h, w}, []int{4, 6, 5}, "|u1", "zlib", y); err != nil {
		t.Fatal(err)
	}
	if err := WriteZarr(filepath.Join(dir, "z.zarr"), []int{d, h, w - 1}, []int{4, 6, 4}, "|u1", "", y[:d*h*(w-1)]); err != nil {
		t.Fatal(err)
	}
	b := progtest.Source(t, `source s zarr {
  path "x.zarr"
  target "y.zarr"
  window [2, 4, 3] stride [2, 2, 2]
  normalize none
}`)
	ds, err := Open(b, WithBase(dir))
	if err != nil {
		t.Fatal(err)
	}
	// depth starts 0, 2; rows 0, 2; columns 0, 2: 8 windows.
	if ds.Len() != 8 || fmt.Sprint(ds.XShape()) != "[2 2 4 3]" || fmt.Sprint(ds.YShape()) != "[1 2 4 3]" {
		t.Fatalf("len %d, x %v, y %v", ds.Len(), ds.XShape(), ds.YShape())
	}
	xs, ys, _ := datatest.ReadAll(t, ds)
	at := func(c, z, r, q int) float32 { return x[((c*d+z)*h+r)*w+q] }
	for i, o := range [][3]int{{0, 0, 0}, {0, 0, 2}, {0, 2, 0}, {0, 2, 2}, {2, 0, 0}, {2, 0, 2}, {2, 2, 0}, {2, 2, 2}} {
		k := 0
		for c := 0; c < 2; c++ {
			for z := 0; z < 2; z++ {
				for r := 0; r < 4; r++ {
					for q := 0; q < 3; q++ {
						if xs[i][k] != at(c, o[0]+z, o[1]+r, o[2]+q) {
							t.Fatalf("window %d value %d: %v, want %v", i, k, xs[i][k], at(c, o[0]+z, o[1]+r, o[2]+q))
						}
						if c == 0 && ys[i][k] != y[((o[0]+z)*h+o[1]+r)*w+o[2]+q] {
							t.Fatalf("window %d target %d wrong", i, k)
						}
						k++
					}
				}
			}
		}
	}
	tn, std := ds.(TargetNormalized).TargetNorm()
	if !std || !near(tn.Mean[0], 1, 0.01) {
		t.Errorf("target norm %v %v", tn, std)
	}
	// normalize standard: every channel has mean 0 and deviation 1.
	b = progtest.Source(t, "source s zarr {\n  path \"x.zarr\"\n}")
	ds, err = Open(b, WithBase(dir))
	if err != nil {
		t.Fatal(err)
	}
	xs, _, _ = datatest.ReadAll(t, ds)
	if len(xs) != 1 || fmt.Sprint(ds.YShape()) != "[0 4 6 5]" {
		t.Fatalf("whole volume: %d samples, y %v", len(xs), ds.YShape())
	}
	per := d * h * w
	for c := 0; c < 2; c++ {
		var s, ss float64
		for _, v := range xs[0][c*per : (c+1)*per] {
			s += float64(v)
			ss += float64(v) * float64(v)
		}
		if !near(s/float64(per), 0, 1e-4) || !near(ss/float64(per), 1, 1e-3) {
			t.Errorf("channel %d: mean %v, mean square %v", c, s/float64(per), ss/float64(per))
		}
	}
	// An OME-Zarr image [T, C, Z, Y, X] of one time point is [C, Z, Y, X].
	if err := WriteZarr(filepath.Join(dir, "ome.zarr", "0"), []int{1, 2, d, h, w}, []int{1, 1, 2, 3, 5}, "<f4", "gzip", x); err != nil {
		t.Fatal(err)
	}
	ds, err = Open(progtest.Source(t, "source s zarr {\n  path \"ome.zarr/0\"\n  normalize none\n  window [4, 6, 5]\n}"), WithBase(dir))
	if err != nil {
		t.Fatal(err)
	}
	if xs, _, _ = datatest.ReadAll(t, ds); fmt.Sprint(ds.XShape()) != "[2 4 6 5]" || xs[0][2*d*h*w-1] != x[len(x)-1] || xs[0][77] != x[77] {
		t.Errorf("OME-Zarr image read as %v", ds.XShape())
	}
	for _, c := range []struct{ src, want string }{
		{"source s zarr {\n  path \"x.zarr\"\n  window [2, 8, 3]\n}", "does not fit the volume's 4x6x5"},
		{"source s zarr {\n  path \"x.zarr\"\n  window [2, 3]\n}", "write [depth, height, width]"},
		{"source s zarr {\n  path \"x.zarr\"\n  target \"z.zarr\"\n}", "it needs the inputs' depth, height and width"},
		{"source s zarr {\n  path \"nothing.zarr\"\n}", "no .zarray"},
	} {
		_, err := Open(progtest.Source(t, c.src), WithBase(dir))
		datatest.WantErr(t, err, c.want)
	}
}

// tiffStack encodes a little-endian multi-page TIFF, one uncompressed
// strip per page of w×h samples of bits 8 or 16, one band.
func tiffStack(pages [][]float32, w, h, bits int) []byte {
	var b bytes.Buffer
	le := binary.LittleEndian
	b.Write([]byte("II"))
	binary.Write(&b, le, uint16(42))
	binary.Write(&b, le, uint32(8))
	for p, px := range pages {
		const entries = 9
		ifd := b.Len()
		data := ifd + 2 + entries*12 + 4
		next := data + len(px)*bits/8
		if p == len(pages)-1 {
			next = 0
		}
		binary.Write(&b, le, uint16(entries))
		tag := func(id, typ uint16, v uint32) {
			binary.Write(&b, le, id)
			binary.Write(&b, le, typ)
			binary.Write(&b, le, uint32(1))
			if typ == 3 {
				binary.Write(&b, le, uint16(v))
				binary.Write(&b, le, uint16(0))
			} else {
				binary.Write(&b, le, v)
			}
		}
		tag(256, 4, uint32(w))              // ImageWidth
		tag(257, 4, uint32(h))              // ImageLength
		tag(258, 3, uint32(bits))           // BitsPerSample
		tag(259, 3, 1)                      // Compression: none
		tag(262, 3, 1)                      // Photometric: black is zero
		tag(273, 4, uint32(data))           // StripOffsets
		tag(277, 3, 1)                      // SamplesPerPixel
		tag(278, 4, uint32(h))              // RowsPerStrip
		tag(279, 4, uint32(len(px)*bits/8)) // StripByteCounts
		binary.Write(&b, le, uint32(next))
		for _, v := range px {
			if bits == 8 {
				b.WriteByte(byte(v))
			} else {
				binary.Write(&b, le, uint16(v))
			}
		}
	}
	return b.Bytes()
}

// TestVolumeSourceTIFFStack reads 8 and 16-bit multi-page TIFFs through
// GDAL: pages are the depth, in order.
func TestVolumeSourceTIFFStack(t *testing.T) {
	for _, bits := range []int{8, 16} {
		t.Run(fmt.Sprint(bits), func(t *testing.T) {
			dir := t.TempDir()
			const d, h, w = 3, 4, 5
			var pages, masks [][]float32
			for z := 0; z < d; z++ {
				pages = append(pages, ramp(h*w, float32(7+z*bits*bits), 250*float32(bits-7)))
				masks = append(masks, ramp(h*w, float32(z+1), 2))
			}
			datatest.WriteFile(t, dir, "x.tif", tiffStack(pages, w, h, bits))
			datatest.WriteFile(t, dir, "y.tif", tiffStack(masks, w, h, 8))
			ds, err := Open(progtest.Source(t, "source s volume {\n  path \"x.tif\"\n  target \"y.tif\"\n  normalize none\n  window [2, 4, 5] stride [1, 1, 1]\n}"), WithBase(dir))
			if err != nil {
				t.Fatal(err)
			}
			if ds.Len() != 2 || fmt.Sprint(ds.XShape()) != "[1 2 4 5]" {
				t.Fatalf("len %d, x %v", ds.Len(), ds.XShape())
			}
			xs, ys, _ := datatest.ReadAll(t, ds)
			for i := 0; i < 2; i++ {
				for z := 0; z < 2; z++ {
					for k := 0; k < h*w; k++ {
						if xs[i][z*h*w+k] != pages[i+z][k] || ys[i][z*h*w+k] != masks[i+z][k] {
							t.Fatalf("window %d, slice %d, value %d: %v (target %v), want %v (%v)", i, z, k, xs[i][z*h*w+k], ys[i][z*h*w+k], pages[i+z][k], masks[i+z][k])
						}
					}
				}
			}
		})
	}
}
