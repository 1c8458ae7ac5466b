package memrun

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestEpochPeakSteps: a run past its first epoch's end by one step where
// that end comes before most steps, least steps otherwise.
func TestEpochPeakSteps(t *testing.T) {
	for _, c := range []struct{ epoch, want int }{
		{446, 4}, // fashion_mlp: no epoch end within 12 steps
		{12, 4},  // an end at the 12th step is not reached before it
		{11, 12}, // olinda
		{5, 6},   // deeplab_olinda's plan
		{2, 4},   // pharma: least is past the end already
		{1, 4},
	} {
		if got := epochPeakSteps(c.epoch, 4, 12); got != c.want {
			t.Errorf("an epoch of %d steps: %d steps, want %d", c.epoch, got, c.want)
		}
	}
}

// TestFirstSamples: the cut idx file says n items and holds the source's
// first n, byte for byte.
func TestFirstSamples(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src.gz"), filepath.Join(dir, "dst.gz")
	raw := []byte{0, 0, 8, 3, 0, 0, 0, 5, 0, 0, 0, 2, 0, 0, 0, 3}
	for i := range 5 * 6 {
		raw = append(raw, byte(i))
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(raw)
	zw.Close()
	if err := os.WriteFile(src, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := firstSamples(src, dst, 2); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(zr)
	want := append([]byte{0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3}, raw[16:16+12]...)
	if !bytes.Equal(got, want) {
		t.Errorf("cut to 2 items: %v, want %v", got, want)
	}
	if err := firstSamples(dst, filepath.Join(dir, "more.gz"), 10); err != nil {
		t.Errorf("asking for more items than there are: %v", err)
	}
	os.WriteFile(src, []byte("not gzip"), 0o644)
	if err := firstSamples(src, dst, 2); err == nil {
		t.Error("a file that is not gzip was cut")
	}
}
