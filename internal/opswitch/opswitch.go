// Package opswitch finds switches on op names in Go source, for the tests
// that keep an engine's dispatch in per-op registrations: a case clause
// naming a stdlib op in a dispatch file means an op's code has crept back
// into a central switch.
package opswitch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"

	"pipe/stdlib"
)

// Case is a case clause naming an op: its line in the file and the op.
type Case struct {
	Line int
	Op   string
}

// Cases lists the case clauses of the Go file that name a stdlib op by a
// string literal.
func Cases(file string) ([]Case, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		return nil, err
	}
	var out []Case
	ast.Inspect(f, func(n ast.Node) bool {
		cc, ok := n.(*ast.CaseClause)
		if !ok {
			return true
		}
		for _, e := range cc.List {
			if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, _ := strconv.Unquote(lit.Value); stdlib.LookupOp(s) != nil {
					out = append(out, Case{fset.Position(lit.Pos()).Line, s})
				}
			}
		}
		return true
	})
	return out, nil
}
