package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"pipe/editor"
	"pipe/spec"
	"pipe/stdlib"
)

// TestGeneratedFilesAreCurrent fails when a generated editor file differs
// from what the registry gives now: a layer, field or value was added or
// renamed in stdlib and `go generate ./editor` was not run. It lives
// beside the generator, which links the engines in: their names are
// words of the grammars.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := editor.Generate(stdlib.Schema())
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Errorf("%v: run go generate ./editor", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("editor/%s is out of date with the stdlib registry: run go generate ./editor", filepath.ToSlash(name))
		}
		if !bytes.Contains(got, []byte("DO NOT EDIT")) {
			t.Errorf("editor/%s does not say DO NOT EDIT", name)
		}
	}
	w := editor.Collect(stdlib.Schema())
	names := spec.Engines()
	for _, e := range names {
		if !slices.Contains(w.Values, e) {
			t.Errorf("the editor's values lack the engine %s", e)
		}
	}
	if len(names) == 0 {
		t.Error("no engine registered")
	}
}
