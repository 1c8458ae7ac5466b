package torch

import (
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestPackageIndexListsEveryModule: the docstring of pipe_torch/__init__.py
// indexes the worker's modules, one line each; every module of the
// package has its line and every line names a module.
func TestPackageIndexListsEveryModule(t *testing.T) {
	init, err := fs.ReadFile(Package, PackageName+"/__init__.py")
	if err != nil {
		t.Fatal(err)
	}
	doc, _, ok := strings.Cut(strings.TrimPrefix(string(init), `"""`), `"""`)
	if !ok {
		t.Fatal("__init__.py opens with no docstring")
	}
	_, index, ok := strings.Cut(doc, "Its modules, one concern each:\n\n")
	if !ok {
		t.Fatal(`__init__.py's docstring has no "Its modules" index`)
	}
	index, _, _ = strings.Cut(index, "\n\n") // the index ends at a blank line
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^    (\w+)  +\S`).FindAllStringSubmatch(index, -1) {
		listed = append(listed, m[1])
	}
	files, err := fs.Glob(Package, PackageName+"/*.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		mod := strings.TrimSuffix(strings.TrimPrefix(f, PackageName+"/"), ".py")
		if mod != "__init__" && !slices.Contains(listed, mod) {
			t.Errorf("module %s is missing from __init__.py's index", mod)
		}
	}
	for _, mod := range listed {
		if !slices.Contains(files, PackageName+"/"+mod+".py") {
			t.Errorf("__init__.py's index lists %s, which is no module", mod)
		}
	}
	if len(listed) < 10 {
		t.Fatalf("read %d lines of the index: the docstring's layout changed", len(listed))
	}
}
