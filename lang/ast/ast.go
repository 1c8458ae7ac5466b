// Package ast is the syntax tree of a .pipe file as the parser leaves it:
// statements made of words, optional bodies, and the comments beside them.
// It is a superset of the language: the parser accepts any sequence of words
// a statement could hold, and the checker (package lang) gives them meaning
// from the stdlib registry and rejects what does not fit with a precise reason.
// Every node carries the range of source it came from.
package ast

import "pipe/diag"

// Node is any syntax node.
type Node interface {
	Rng() diag.Range
}

// File is a parsed .pipe file.
type File struct {
	Name     string
	Stmts    []*Stmt
	Comments []*Comment
	Range    diag.Range
	// Partial is set when the parser had to leave something out: checks
	// that need the whole file (is there a model to train?) are skipped.
	Partial bool
}

// Rng implements Node.
func (f *File) Rng() diag.Range { return f.Range }

// Comment is a // line comment or a /* block */ comment, text included.
type Comment struct {
	Text  string
	Range diag.Range
}

// Rng implements Node.
func (c *Comment) Rng() diag.Range { return c.Range }

// Stmt is one statement: an optional label ("skip ="), the words of the
// statement, and an optional body in braces. Statements end at a newline or
// a semicolon outside brackets; several fields may share one line, and the
// checker splits them by the names it knows.
type Stmt struct {
	Label *Ident
	Words []Expr
	Body  *Body
	Range diag.Range
}

// Rng implements Node.
func (s *Stmt) Rng() diag.Range { return s.Range }

// Body is a braced list of statements. Its range covers the braces.
type Body struct {
	Stmts []*Stmt
	Range diag.Range
}

// Rng implements Node.
func (b *Body) Rng() diag.Range { return b.Range }

// Expr is one word of a statement.
type Expr interface {
	Node
	exprNode()
}

// Ident is a name: a block kind, a field, a layer, an enum value, a
// reference. Names may hold '-' and ':' between letters and digits
// ("a100-80gb", "cuda:0").
type Ident struct {
	Name  string
	Range diag.Range
}

// Number is a numeric literal, possibly with a unit suffix ("1e-3", "24GiB",
// "1.5TB/s", "312TFLOPS"). Text is the literal as written.
type Number struct {
	Text  string
	Value float64
	// IsInt is true when the literal has no '.', no exponent and fits int64.
	IsInt bool
	Int   int64
	// Unit is the suffix after the digits, empty when there is none.
	Unit  string
	Range diag.Range
}

// String is a double-quoted string; Value is unquoted.
type String struct {
	Value string
	Range diag.Range
}

// Size is a product of extents written with 'x' ("64x64", "3x224x224").
type Size struct {
	Dims  []int64
	Text  string
	Range diag.Range
}

// List is a bracketed, comma-separated list. Each element is a sequence of
// words, usually one.
type List struct {
	Elems []*Seq
	Range diag.Range
}

// Seq is a sequence of words inside a list element.
type Seq struct {
	Words []Expr
	Range diag.Range
}

// Paren is a parenthesised group of words: the arguments of auto(max 256),
// the body of a repeat 3 * (conv 64 k3 -> relu), or a branch add(x -> conv).
type Paren struct {
	Words []Expr
	Range diag.Range
}

// Punct is an operator word: "->", "*", "=", ":", "+", "-".
type Punct struct {
	Op    string
	Range diag.Range
}

// Bad stands for a token the parser could not use; a diagnostic was
// reported for it.
type Bad struct {
	Text  string
	Range diag.Range
}

func (*Ident) exprNode()  {}
func (*Number) exprNode() {}
func (*String) exprNode() {}
func (*Size) exprNode()   {}
func (*List) exprNode()   {}
func (*Paren) exprNode()  {}
func (*Punct) exprNode()  {}
func (*Bad) exprNode()    {}

// Rng implements Node.
func (e *Ident) Rng() diag.Range { return e.Range }

// Rng implements Node.
func (e *Number) Rng() diag.Range { return e.Range }

// Rng implements Node.
func (e *String) Rng() diag.Range { return e.Range }

// Rng implements Node.
func (e *Size) Rng() diag.Range { return e.Range }

// Rng implements Node.
func (e *List) Rng() diag.Range { return e.Range }

// Rng implements Node.
func (e *Seq) Rng() diag.Range { return e.Range }

// Rng implements Node.
func (e *Paren) Rng() diag.Range { return e.Range }

// Rng implements Node.
func (e *Punct) Rng() diag.Range { return e.Range }

// Rng implements Node.
func (e *Bad) Rng() diag.Range { return e.Range }

// Walk calls fn for n and every node below it, depth first, until fn
// returns false for a node (its children are then skipped).
func Walk(n Node, fn func(Node) bool) {
	if n == nil || !fn(n) {
		return
	}
	switch n := n.(type) {
	case *File:
		for _, s := range n.Stmts {
			Walk(s, fn)
		}
	case *Stmt:
		if n.Label != nil {
			Walk(n.Label, fn)
		}
		for _, w := range n.Words {
			Walk(w, fn)
		}
		if n.Body != nil {
			Walk(n.Body, fn)
		}
	case *Body:
		for _, s := range n.Stmts {
			Walk(s, fn)
		}
	case *List:
		for _, e := range n.Elems {
			Walk(e, fn)
		}
	case *Seq:
		for _, w := range n.Words {
			Walk(w, fn)
		}
	case *Paren:
		for _, w := range n.Words {
			Walk(w, fn)
		}
	}
}
