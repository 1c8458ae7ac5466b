// Package datatest holds the helpers the tests of the data readers share
// (package dataset and dataset/geotiff): writing a file under a folder,
// reading every sample of a dataset, and an error that must say certain
// things. A source snippet's spec comes from internal/progtest, which may
// read the syntax that no package under dataset imports.
package datatest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WriteFile writes data to dir/name, creating folders, and returns the
// file's path.
func WriteFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Samples is what ReadAll reads: a dataset of samples of fixed shapes.
type Samples interface {
	Len() int
	XShape() []int64
	YShape() []int64
	Read(i int, x, y, mask []float32) error
}

// ReadAll reads every sample of ds: its inputs, targets and masks.
func ReadAll(t testing.TB, ds Samples) (xs, ys, ms [][]float32) {
	t.Helper()
	xn, yn := size(ds.XShape()), size(ds.YShape())
	for i := range ds.Len() {
		x, y, m := make([]float32, xn), make([]float32, yn), make([]float32, yn)
		if err := ds.Read(i, x, y, m); err != nil {
			t.Fatalf("Read(%d): %v", i, err)
		}
		xs, ys, ms = append(xs, x), append(ys, y), append(ms, m)
	}
	return
}

// WantErr fails unless err is an error whose message contains each part.
func WantErr(t testing.TB, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

func size(shape []int64) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}
