package dataset

import (
	"errors"
	"image/color"
	"slices"
	"testing"

	"pipe/dataset/internal/datatest"
	"pipe/internal/progtest"
)

// TestSampleShapeIsOpens: for each kind SampleShape reads from headers,
// the shape is the one Open's XShape gives, and where Open fails on a
// missing file or a header, SampleShape fails with the same words on the
// same field.
func TestSampleShapeIsOpens(t *testing.T) {
	dir := t.TempDir()
	pix := make([]byte, 4*5*6)
	datatest.WriteFile(t, dir, "img.gz", gz(idxBytes([]int{4, 5, 6}, pix)))
	datatest.WriteFile(t, dir, "rgb", idxBytes([]int{4, 3, 2, 5}, make([]byte, 4*3*2*5)))
	datatest.WriteFile(t, dir, "lab", idxBytes([]int{4}, []byte{0, 1, 2, 1}))
	datatest.WriteFile(t, dir, "lab3", idxBytes([]int{3}, []byte{0, 1, 2}))
	datatest.WriteFile(t, dir, "t.csv", []byte("a,b,c,y\n1,2,3,0\n4,5,6,1\n"))
	datatest.WriteFile(t, dir, "t.tsv", []byte("1;2;x\n3;4;y\n"))
	datatest.WriteFile(t, dir, "pets/cat/red.png", pngBytes(t, uniform(10, 12, color.RGBA{200, 0, 0, 255})))
	datatest.WriteFile(t, dir, "pets/dog/red.png", pngBytes(t, uniform(10, 12, color.RGBA{0, 0, 200, 255})))
	for _, c := range []struct {
		src  string
		opts []Option
	}{
		{src: `source s idx { images "img.gz"  labels "lab" }`},
		{src: `source s idx { images "rgb"  labels "lab" }`},
		{src: `source s idx { images "img.gz"  labels "lab3" }`},
		{src: `source s idx { images "nope.gz"  labels "lab" }`},
		{src: `source s idx { images "img.gz"  labels "nope" }`},
		{src: `source s idx { images "t.csv"  labels "lab" }`},
		{src: `source s csv { path "t.csv"  label y }`},
		{src: `source s csv { path "t.csv"  features [a, c]  label y }`},
		{src: `source s csv { path "t.tsv"  header false  delimiter ";"  label c3 }`},
		{src: `source s csv { path "nope.csv"  label y }`},
		{src: `source s images { path "pets" }`},
		{src: `source s images { path "pets"  channels 1 }`},
		{src: `source s images { path "pets"  resize 8x9 }`},
		{src: `source s images { path "pets" }`, opts: []Option{WithChannels(1)}},
		{src: `source s images { path "nope" }`},
		{src: `source s synthetic { samples 10  shape [2, 3]  classes 4 }`},
	} {
		b := progtest.Source(t, c.src)
		opts := append([]Option{WithBase(dir)}, c.opts...)
		shape, perr := SampleShape(b, opts...)
		ds, oerr := Open(b, opts...)
		switch {
		case oerr != nil:
			if perr == nil || perr.Error() != oerr.Error() {
				t.Errorf("%s: SampleShape's error %v, Open's %v", c.src, perr, oerr)
			}
			var ps, os *SourceError
			if errors.As(oerr, &os) && (!errors.As(perr, &ps) || ps.Subject != os.Subject) {
				t.Errorf("%s: SampleShape's error is not on Open's field: %v", c.src, perr)
			}
		case perr != nil:
			t.Errorf("%s: SampleShape failed (%v) where Open did not", c.src, perr)
		default:
			if shape == nil || !slices.Equal(shape, ds.XShape()) {
				t.Errorf("%s: SampleShape %v, Open's XShape %v", c.src, shape, ds.XShape())
			}
			ds.Close()
		}
	}
}
