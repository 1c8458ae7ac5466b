package dataset

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"pipe/dataset/internal/datatest"
	"pipe/internal/progtest"
	"slices"
	"testing"
)

func pngBytes(t testing.TB, img image.Image) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegBytes(t testing.TB, img image.Image) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func uniform(w, h int, c color.Color) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, c)
		}
	}
	return img
}

// imageFolder writes two classes: cat (a red 10x12 PNG, a gray 6x6 PNG)
// and dog (a blue 16x16 JPEG, a truncated JPEG, and a text file).
func imageFolder(t *testing.T) string {
	dir := t.TempDir()
	datatest.WriteFile(t, dir, "pets/cat/red.png", pngBytes(t, uniform(10, 12, color.RGBA{200, 0, 0, 255})))
	g := image.NewGray(image.Rect(0, 0, 6, 6))
	for i := range g.Pix {
		g.Pix[i] = 100
	}
	datatest.WriteFile(t, dir, "pets/cat/gray.png", pngBytes(t, g))
	blue := jpegBytes(t, uniform(16, 16, color.RGBA{0, 0, 255, 255}))
	datatest.WriteFile(t, dir, "pets/dog/blue.jpg", blue)
	datatest.WriteFile(t, dir, "pets/dog/bad.jpg", blue[:len(blue)/3])
	datatest.WriteFile(t, dir, "pets/dog/notes.txt", []byte("not an image"))
	return dir
}

func TestImagesStrict(t *testing.T) {
	dir := imageFolder(t)
	_, err := Open(progtest.Source(t, `source p images { path "pets"  resize 8x8 }`), WithBase(dir))
	datatest.WantErr(t, err, "pets/dog/bad.jpg: cannot decode", "strict false")
}

func TestImagesSkip(t *testing.T) {
	dir := imageFolder(t)
	ds, err := Open(progtest.Source(t, `source p images { path "pets"  resize 8x8  strict false }`), WithBase(dir))
	if err != nil {
		t.Fatal(err)
	}
	if ds.Len() != 3 || ds.(Skipper).Skipped() != 1 || ds.Classes() != 2 {
		t.Fatalf("Len %d Skipped %d Classes %d", ds.Len(), ds.(Skipper).Skipped(), ds.Classes())
	}
	if got := ds.(ClassNamer).ClassNames(); !slices.Equal(got, []string{"cat", "dog"}) {
		t.Fatalf("ClassNames %v", got)
	}
	if !slices.Equal(ds.XShape(), []int64{3, 8, 8}) || len(ds.YShape()) != 0 {
		t.Fatalf("XShape %v YShape %v", ds.XShape(), ds.YShape())
	}
	xs, ys, _ := datatest.ReadAll(t, ds)
	// Files in name order within each class: cat/gray, cat/red, dog/blue.
	want := []struct {
		class   float32
		r, g, b float64
		tol     float64
	}{{0, 100, 100, 100, 0}, {0, 200, 0, 0, 0}, {1, 0, 0, 255, 3}}
	for i, w := range want {
		if ys[i][0] != w.class {
			t.Fatalf("sample %d class %v", i, ys[i][0])
		}
		for ch, v := range []float64{w.r, w.g, w.b} {
			for p := range 64 {
				if got := float64(xs[i][ch*64+p]) * 255; math.Abs(got-v) > w.tol+1e-3 {
					t.Fatalf("sample %d channel %d pixel %d = %v, want %v", i, ch, p, got, v)
				}
			}
		}
	}
}

func TestImagesOneChannelStandard(t *testing.T) {
	dir := imageFolder(t)
	ds, err := Open(progtest.Source(t, `source p images { path "pets"  resize 4x4  strict false  normalize standard }`), WithBase(dir), WithChannels(1))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ds.XShape(), []int64{1, 4, 4}) {
		t.Fatalf("XShape %v", ds.XShape())
	}
	xs, _, _ := datatest.ReadAll(t, ds)
	var s, ss float64
	for _, x := range xs {
		for _, v := range x {
			s += float64(v)
			ss += float64(v * v)
		}
	}
	n := float64(3 * 16)
	if !near(s/n, 0, 1e-5) || !near(ss/n, 1, 1e-4) {
		t.Fatalf("standardised mean %v, mean square %v", s/n, ss/n)
	}
}

func TestImagesSizeMismatch(t *testing.T) {
	dir := imageFolder(t)
	_, err := Open(progtest.Source(t, `source p images { path "pets"  strict false }`), WithBase(dir))
	datatest.WantErr(t, err, "pets/cat/red.png: the image is 12x10 but the first one is 6x6; add resize")
}

func TestImagesSegmentation(t *testing.T) {
	dir := t.TempDir()
	datatest.WriteFile(t, dir, "img/a.png", pngBytes(t, uniform(16, 16, color.RGBA{10, 20, 30, 255})))
	datatest.WriteFile(t, dir, "img/b.png", pngBytes(t, uniform(16, 16, color.RGBA{40, 50, 60, 255})))
	m := image.NewGray(image.Rect(0, 0, 16, 16))
	for y := range 16 {
		for x := range 8 {
			m.Pix[y*16+x] = 255 // left half
		}
	}
	datatest.WriteFile(t, dir, "msk/a.png", pngBytes(t, m))
	_, err := Open(progtest.Source(t, `source s images { path "img"  masks "msk"  resize 8x8 }`), WithBase(dir))
	datatest.WantErr(t, err, "img/b.png: no mask named b.* in msk")

	ds, err := Open(progtest.Source(t, `source s images { path "img"  masks "msk"  resize 8x8  strict false }`), WithBase(dir))
	if err != nil {
		t.Fatal(err)
	}
	if ds.Len() != 1 || ds.(Skipper).Skipped() != 1 || !slices.Equal(ds.YShape(), []int64{1, 8, 8}) {
		t.Fatalf("Len %d Skipped %d YShape %v", ds.Len(), ds.(Skipper).Skipped(), ds.YShape())
	}
	_, ys, _ := datatest.ReadAll(t, ds)
	for p, v := range ys[0] {
		if want := b2f(p%8 < 4); v != want {
			t.Fatalf("mask pixel %d = %v, want %v", p, v, want)
		}
	}
}
