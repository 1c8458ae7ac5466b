package planner

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// callerDebt is, for each caller of the planner, the identifiers that
// still name an engine and the engines it still imports ("import
// PATH"): cmd exports TorchScript through its exporter
// (export/torchscript) and shows the plan's torch fields
// (docs/design/engines.md, "What is not moved yet"). The lists may only
// shrink.
var callerDebt = map[string][]string{
	"../workflow": nil,
	"../run":      nil,
	"../cmd":      {"Torch", "writeTorchScript", "ExportTorchScript", "torchscript"},
}

// TestPlannerNamesNoEngine holds that the planner's code decides by the
// engines' traits: no identifier of package planner's (nor a name it
// uses) says native or torch, and it imports no
// engine: it reads what each engine says of the host (cost.Host) and of
// its worker's process (cost.Processor) through the descriptor.
func TestPlannerNamesNoEngine(t *testing.T) {
	paths, _ := filepath.Glob("*.go")
	namesNoEngine(t, paths, nil, nil)
}

// TestCallersNameNoEngine holds the same of the planner's callers,
// workflow, run and cmd, with their packages below: they start, probe
// and pick the engines through the registry (engine.Registered,
// cost.Registered) and the engines' traits, beyond callerDebt. Linking
// every engine in (engine/costs) is the one registration they import.
func TestCallersNameNoEngine(t *testing.T) {
	for dir, debt := range callerDebt {
		var paths []string
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") {
				paths = append(paths, path)
			}
			return err
		})
		if err != nil || len(paths) == 0 {
			t.Fatalf("%s: %d files, %v", dir, len(paths), err)
		}
		namesNoEngine(t, paths, []string{"pipe/engine", "pipe/engine/costs"}, debt)
	}
}

// namesNoEngine fails where a file of paths (tests left out) imports a
// package under engine other than those allowed, or has an identifier
// that says native or torch, beyond debt; and where an entry of debt is
// no longer needed.
func namesNoEngine(t *testing.T, paths, allowed, debt []string) {
	t.Helper()
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
			p := strings.Trim(im.Path.Value, `"`)
			if (p == "pipe/engine" || strings.HasPrefix(p, "pipe/engine/")) && !slices.Contains(allowed, p) {
				if !slices.Contains(debt, "import "+p) {
					t.Errorf("%s imports %s", path, p)
				}
				seen["import "+p] = true
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			low := strings.ToLower(id.Name)
			if (strings.Contains(low, "native") || strings.Contains(low, "torch")) && !slices.Contains(debt, id.Name) {
				t.Errorf("%s: %s names an engine", fset.Position(id.Pos()), id.Name)
			}
			seen[id.Name] = true
			return true
		})
	}
	for _, d := range debt {
		if !seen[d] {
			t.Errorf("%s is gone: take it off the debt list", d)
		}
	}
}

// TestPlannerReadsNoSyntax holds that no non-test file of the planner or
// a package below it imports pipe/lang or a package under it: the planner
// takes the decoded program (stdlib.Program, spec.Program), which
// workflow decodes once, so that a setting has one decoder.
func TestPlannerReadsNoSyntax(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, im := range f.Imports {
			if p := strings.Trim(im.Path.Value, `"`); p == "pipe/lang" || strings.HasPrefix(p, "pipe/lang/") {
				t.Errorf("%s imports %s", path, p)
			}
		}
		return nil
	})
	if err != nil || checked < 20 {
		t.Fatalf("%d files checked: %v", checked, err)
	}
}
