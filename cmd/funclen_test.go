package cmd_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines is the longest a function in cmd/ may be: the CLI parses flags
// and renders; what is longer is a decision, and belongs in workflow.
const maxLines = 80

// TestNoLongFunctions fails on a function or method of the CLI's code
// under cmd/ (tests aside) over maxLines lines, from func to its closing
// brace.
func TestNoLongFunctions(t *testing.T) {
	fset := token.NewFileSet()
	n := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n++
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if lines > maxLines {
				t.Errorf("%s: %s is %d lines; at most %d", fset.Position(fn.Pos()), fn.Name.Name, lines, maxLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 50 {
		t.Fatalf("found %d functions under cmd/: the walk missed the command", n)
	}
}
