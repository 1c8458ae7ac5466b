package dataset

import (
	"errors"
	"math"
	"path/filepath"
	"pipe/dataset/internal/datatest"
	"pipe/internal/progtest"
	"testing"
)

func idxFixture(t *testing.T, n, h, w int) (dir string, pix, labels []byte) {
	dir = t.TempDir()
	pix = make([]byte, n*h*w)
	for i := range pix {
		pix[i] = byte(i * 7)
	}
	labels = make([]byte, n)
	for i := range labels {
		labels[i] = byte(i % 4)
	}
	datatest.WriteFile(t, dir, "img.gz", gz(idxBytes([]int{n, h, w}, pix)))
	datatest.WriteFile(t, dir, "lab", idxBytes([]int{n}, labels))
	return dir, pix, labels
}

func TestIDX(t *testing.T) {
	dir, pix, labels := idxFixture(t, 6, 4, 3)
	ds, err := Open(progtest.Source(t, `source s idx { images "img.gz"  labels "lab" }`), WithBase(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.Len() != 6 || prod(ds.XShape()) != 12 || len(ds.XShape()) != 3 || ds.XShape()[0] != 1 {
		t.Fatalf("Len %d XShape %v", ds.Len(), ds.XShape())
	}
	if ds.Classes() != 4 || len(ds.YShape()) != 0 {
		t.Fatalf("Classes %d YShape %v", ds.Classes(), ds.YShape())
	}
	xs, ys, _ := datatest.ReadAll(t, ds)
	for i := range xs {
		if ys[i][0] != float32(labels[i]) {
			t.Fatalf("label %d = %v, want %d", i, ys[i][0], labels[i])
		}
		for j, v := range xs[i] {
			if want := float32(pix[i*12+j]) / 255; math.Abs(float64(v-want)) > 1e-6 {
				t.Fatalf("x[%d][%d] = %v, want %v", i, j, v, want)
			}
		}
	}
}

func TestIDXStandard(t *testing.T) {
	dir, _, _ := idxFixture(t, 6, 4, 3)
	ds, err := Open(progtest.Source(t, `source s idx { images "img.gz"  labels "lab"  normalize standard }`), WithBase(dir))
	if err != nil {
		t.Fatal(err)
	}
	xs, _, _ := datatest.ReadAll(t, ds)
	var s, ss float64
	n := 0
	for _, x := range xs {
		for _, v := range x {
			s += float64(v)
			ss += float64(v) * float64(v)
			n++
		}
	}
	if mean, variance := s/float64(n), ss/float64(n)-(s/float64(n))*(s/float64(n)); !near(mean, 0, 1e-5) || !near(variance, 1, 1e-4) {
		t.Fatalf("standardised mean %v variance %v", mean, variance)
	}
}

func TestIDXErrors(t *testing.T) {
	dir, pix, labels := idxFixture(t, 6, 4, 3)
	full := idxBytes([]int{6, 4, 3}, pix)
	datatest.WriteFile(t, dir, "short", full[:len(full)-5])
	datatest.WriteFile(t, dir, "short.gz", gz(full)[:40])
	datatest.WriteFile(t, dir, "magic", append([]byte{1, 2, 3, 4}, full[4:]...))
	datatest.WriteFile(t, dir, "float", append([]byte{0, 0, 0x0d, 3}, full[4:]...))
	datatest.WriteFile(t, dir, "lab5", idxBytes([]int{5}, labels[:5]))
	datatest.WriteFile(t, dir, "long", append(full, 1, 2, 3))
	cases := []struct {
		images, labels string
		want           []string
	}{
		{"nope.gz", "lab", []string{"nope.gz", "file not found", filepath.Join(dir, "nope.gz")}},
		{"short", "lab", []string{"short: truncated IDX", "6 items of 4x3", "72 bytes from offset 16", "only 67 bytes"}},
		{"short.gz", "lab", []string{"short.gz: truncated IDX", "gzip stream is cut short"}},
		{"magic", "lab", []string{"magic: not an IDX file", "0x01020304", "offset 0"}},
		{"float", "lab", []string{"element type 0x0d"}},
		{"img.gz", "lab5", []string{"lab5 has 5 labels", "img.gz has 6 images"}},
		{"long", "lab", []string{"long: the file goes on", "offset 88"}},
	}
	for _, c := range cases {
		_, err := Open(progtest.Source(t, `source s idx { images "`+c.images+`"  labels "`+c.labels+`" }`), WithBase(dir))
		datatest.WantErr(t, err, c.want...)
		var se *SourceError
		if !errors.As(err, &se) || se.Subject.Start.Line != 1 {
			t.Errorf("%s: error %T has no source range", c.images, err)
		}
	}
}
