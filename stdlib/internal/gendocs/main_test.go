package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"pipe/spec"
	"pipe/stdlib"
)

// TestReferenceUpToDate fails when docs/reference.md no longer matches the
// registry; run go generate ./stdlib. It lives beside the generator, which
// links the engines in: their names are part of the reference.
func TestReferenceUpToDate(t *testing.T) {
	var b bytes.Buffer
	if err := stdlib.WriteReference(&b); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../../docs/reference.md")
	if err != nil || !bytes.Equal(got, b.Bytes()) {
		t.Fatalf("docs/reference.md is out of date with the registry: run go generate ./stdlib")
	}
	for _, l := range stdlib.Schema().Layers() {
		if !bytes.Contains(got, []byte("`"+l.Name+"`")) {
			t.Errorf("reference lacks layer %s", l.Name)
		}
	}
	names := spec.Engines()
	if len(names) == 0 || !bytes.Contains(got, []byte("("+strings.Join(names, ", ")+")")) {
		t.Errorf("reference lacks the engines %v", names)
	}
}
