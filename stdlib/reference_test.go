package stdlib

import (
	"bytes"
	"os"
	"testing"
)

// TestReferenceUpToDate fails when docs/reference.md no longer matches the
// registry; run go generate ./stdlib.
func TestReferenceUpToDate(t *testing.T) {
	var b bytes.Buffer
	if err := WriteReference(&b); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../docs/reference.md")
	if err != nil || !bytes.Equal(got, b.Bytes()) {
		t.Fatalf("docs/reference.md is out of date with the registry: run go generate ./stdlib")
	}
	for _, l := range Schema().Layers() {
		if !bytes.Contains(got, []byte("`"+l.Name+"`")) {
			t.Errorf("reference lacks layer %s", l.Name)
		}
	}
}
