package dataset

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/lang"
	"pipe/spec"
	"pipe/stdlib"
)

// srcSpec checks a .pipe snippet holding one source block and returns its
// decoded spec.
func srcSpec(t testing.TB, src string) *spec.Source {
	t.Helper()
	f, ds := lang.Parse("test.pipe", []byte(src))
	if ds.HasErrors() {
		t.Fatalf("parse: %v", ds)
	}
	p, ds := lang.Check(f, stdlib.Schema())
	if ds.HasErrors() {
		t.Fatalf("check: %v", ds)
	}
	b := p.Block("source")
	if b == nil {
		t.Fatal("no source block")
	}
	s, ds := stdlib.DecodeSource(b)
	if ds.HasErrors() {
		t.Fatalf("decode: %v", ds)
	}
	return s
}

// writeFile writes data under dir, creating folders.
func writeFile(t testing.TB, dir, name string, data []byte) string {
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

// idxBytes encodes an IDX file of unsigned bytes.
func idxBytes(dims []int, data []byte) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, 0x08, byte(len(dims))})
	for _, d := range dims {
		binary.Write(&b, binary.BigEndian, uint32(d))
	}
	b.Write(data)
	return b.Bytes()
}

func gz(data []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(data)
	w.Close()
	return b.Bytes()
}

// readAll reads every sample of ds.
func readAll(t testing.TB, ds Dataset) (xs, ys, ms [][]float32) {
	t.Helper()
	xn, yn := prod(ds.XShape()), prod(ds.YShape())
	for i := range ds.Len() {
		x, y, m := make([]float32, xn), make([]float32, yn), make([]float32, yn)
		if err := ds.Read(i, x, y, m); err != nil {
			t.Fatalf("Read(%d): %v", i, err)
		}
		xs, ys, ms = append(xs, x), append(ys, y), append(ms, m)
	}
	return
}

func wantErr(t testing.TB, err error, parts ...string) {
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

func near(a, b, tol float64) bool { return a-b <= tol && b-a <= tol }

func b2f(b bool) float32 {
	if b {
		return 1
	}
	return 0
}
