package planner

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// engineDebt is the planner's identifiers that still name an engine:
// the torch worker's process terms and the host facts only it reads
// (docs/design/engines.md, "What is not moved yet"). The list may only
// shrink.
var engineDebt = []string{
	"Torch", "TorchAllocator", "TorchCPURuntime", "TorchOneDNNMaxISA", "TorchOneDNNOff", "TorchTCMalloc", "TorchVersion",
	"torchBatchnormStats", "torchCPUTerms", "torchInputSlots",
}

// TestPlannerNamesNoEngine holds that the planner's code decides by the
// engines' traits: no identifier of package planner's (nor a name it
// uses) says native or torch, beyond engineDebt, and it imports no
// engine.
func TestPlannerNamesNoEngine(t *testing.T) {
	paths, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	seen := map[string]bool{}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			if strings.HasPrefix(strings.Trim(im.Path.Value, `"`), "pipe/engine") {
				t.Errorf("%s imports %s", path, im.Path.Value)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			low := strings.ToLower(id.Name)
			if (strings.Contains(low, "native") || strings.Contains(low, "torch")) && !slices.Contains(engineDebt, id.Name) {
				t.Errorf("%s: %s names an engine", fset.Position(id.Pos()), id.Name)
			}
			seen[id.Name] = true
			return true
		})
	}
	for _, d := range engineDebt {
		if !seen[d] {
			t.Errorf("%s is gone: take it off engineDebt", d)
		}
	}
}
