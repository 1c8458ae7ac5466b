package lang

import (
	"fmt"
	"strings"

	"pipe/diag"
	"pipe/lang/ast"
)

// model checks a model block. Each statement of the body is one of:
//
//	input [C, H, W]                 a field of the model
//	x = conv 64 k3 -> relu          a chain of layers, optionally labelled
//	3 * (conv 64 k3 -> relu)        a repeated chain
//	depth 3                         an argument of the family the model is
//	                                named after (model unet { depth 3 })
func (c *checker) model(b *Block, body *ast.Body) {
	m := &Model{Range: b.Range}
	if len(b.Labels) > 0 {
		m.Name, m.NameRange = b.Labels[0].Value, b.Labels[0].Range
	}
	b.Model = m
	family := c.schema.Layer(m.Name)
	if family != nil && !family.Family {
		family = nil
	}
	owner := "model " + m.Name
	var familyWords []ast.Expr
	labels := map[string]diag.Range{}
	failed := 0
	for _, st := range body.Stmts {
		if st.Body != nil {
			c.errorf(st.Body.Range, "nested-block", "a model cannot hold a block",
				"A model's body holds its input and its layers.")
			continue
		}
		head, _ := st.Words[0].(*ast.Ident)
		if st.Label == nil && head != nil {
			if fs := findField(b.Spec.Fields, head.Name); fs != nil {
				// A field may share its line with layers: input [4]  dense 2.
				// So may a family's arguments: input [6, 64, 64]  depth 3.
				j := 1
				for j < len(st.Words) && !c.startsLayer(st.Words, j) && !isFamilyArg(family, st.Words[j]) {
					j++
				}
				c.fields(b, b.Spec.Fields, st.Words[:j], owner)
				if j == len(st.Words) {
					continue
				}
				if isFamilyArg(family, st.Words[j]) {
					familyWords = append(familyWords, st.Words[j:]...)
					continue
				}
				st = &ast.Stmt{Words: st.Words[j:], Range: diag.Join(st.Words[j].Rng(), st.Words[len(st.Words)-1].Rng())}
			}
			if family != nil && family.Arg(head.Name) != nil && c.schema.Layer(head.Name) == nil {
				familyWords = append(familyWords, st.Words...)
				continue
			}
		}
		ch := c.chain(st.Words, st.Range, fromStmt)
		if ch == nil {
			failed++
			continue
		}
		ms := &ModelStmt{Chain: ch, Range: st.Range}
		if st.Label != nil {
			ms.Label, ms.LabelRange = st.Label.Name, st.Label.Range
			if c.schema.Layer(st.Label.Name) != nil {
				c.errorf(st.Label.Range, "bad-label", fmt.Sprintf("label %s is a layer's name", quote(st.Label.Name)),
					"Pick another name, so that %s can only mean the layer.", st.Label.Name)
			} else if prev, dup := labels[st.Label.Name]; dup {
				c.errorf(st.Label.Range, "duplicate-label", fmt.Sprintf("tensor %s is labelled twice", quote(st.Label.Name)),
					"It is already labelled at line %d; give this one another name.", prev.Start.Line)
			}
			labels[st.Label.Name] = st.Label.Range
		}
		m.Stmts = append(m.Stmts, ms)
	}
	if family != nil && len(familyWords) > 0 {
		if len(m.Stmts) > 0 {
			c.errorf(familyWords[0].Rng(), "mixed-model", fmt.Sprintf("model %s mixes family arguments and layers", m.Name),
				"A model named after the %s family takes only its arguments; to add layers, write the family as a layer: %s %s -> ...",
				m.Name, m.Name, familyWords[0].(*ast.Ident).Name)
		}
		call := &LayerCall{Name: family.Name, Spec: family, Range: m.NameRange, NameRange: m.NameRange}
		call.Args = c.args(family.Args, familyWords, family.Name, owner, m.NameRange)
		m.Stmts = []*ModelStmt{{Chain: &Chain{Nodes: []ChainNode{call}, Range: m.NameRange}, Range: m.NameRange}}
	} else if family != nil && len(m.Stmts) == 0 {
		call := &LayerCall{Name: family.Name, Spec: family, Args: Args{}, Range: m.NameRange, NameRange: m.NameRange}
		m.Stmts = []*ModelStmt{{Chain: &Chain{Nodes: []ChainNode{call}, Range: m.NameRange}, Range: m.NameRange}}
	}
	for _, f := range b.Fields {
		if f.Name == "input" {
			if v := f.First(); v != nil {
				m.Input, m.InputRange = v.Dims, v.Range
			}
			continue
		}
		m.Fields = append(m.Fields, f)
	}
	if len(m.Stmts) == 0 {
		if failed > 0 {
			return
		}
		c.errorf(m.NameRange, "empty-model", fmt.Sprintf("model %s has no layers", m.Name),
			"Write its layers as chains (conv 32 k3 -> relu -> ...), or name the model after a family (model unet { depth 3 }), or use a family as a layer (resnet18 classes 10).")
		return
	}
	before := len(c.diags.Errs())
	if before == 0 || !c.modelHasErrors(m) {
		c.diags = append(c.diags, c.schema.CheckModel(m)...)
	}
}

// isFamilyArg reports whether w names an argument of the model's family.
func isFamilyArg(family *LayerSpec, w ast.Expr) bool {
	id, ok := w.(*ast.Ident)
	return ok && family != nil && family.Arg(id.Name) != nil
}

// startsLayer reports whether words[j] begins a chain: a layer's name or a
// repeat count followed by '*'.
func (c *checker) startsLayer(words []ast.Expr, j int) bool {
	switch w := words[j].(type) {
	case *ast.Ident:
		return c.schema.Layer(w.Name) != nil
	case *ast.Number:
		if j+1 < len(words) {
			p, ok := words[j+1].(*ast.Punct)
			return ok && p.Op == "*"
		}
	}
	return false
}

// modelHasErrors reports whether an error was already reported inside the
// model; its shapes are then not checked, to avoid follow-on noise.
func (c *checker) modelHasErrors(m *Model) bool {
	for _, d := range c.diags {
		if d.Severity == diag.Error && d.Subject != nil &&
			d.Subject.Start.Byte >= m.Range.Start.Byte && d.Subject.Start.Byte < m.Range.End.Byte {
			return true
		}
	}
	return false
}

// Where a chain may start from a labelled tensor.
const (
	fromNone   = iota // inside a repeat or a group: the chain continues the flow
	fromStmt          // a model statement: "x -> conv 64 k1" starts from x
	fromBranch        // a tensor argument: add(x) or add(x -> conv 64 k1)
)

// chain reads layers joined by "->".
func (c *checker) chain(words []ast.Expr, r diag.Range, from int) *Chain {
	ch := &Chain{Range: r}
	var segs [][]ast.Expr
	var arrows []*ast.Punct
	start := 0
	for i, w := range words {
		if p, ok := w.(*ast.Punct); ok && p.Op == "->" {
			segs = append(segs, words[start:i])
			arrows = append(arrows, p)
			start = i + 1
		}
	}
	segs = append(segs, words[start:])
	ok := true
	for i, seg := range segs {
		if len(seg) == 0 {
			at := r
			if i < len(arrows) {
				at = arrows[i].Range
			} else if len(arrows) > 0 {
				at = arrows[len(arrows)-1].Range
			}
			c.errorf(at, "missing-layer", "missing layer", "Each '->' must have a layer on both sides.")
			ok = false
			continue
		}
		if i == 0 && from != fromNone && len(seg) == 1 {
			// A lone name that is not a layer starts the chain from a
			// labelled tensor: "x -> conv 64 k1", or "add(x)" in a branch.
			if id, isID := seg[0].(*ast.Ident); isID && c.schema.Layer(id.Name) == nil && (len(segs) > 1 || from == fromBranch) {
				ch.From, ch.FromRange = id.Name, id.Range
				continue
			}
		}
		n := c.segment(seg)
		if n == nil {
			ok = false
			continue
		}
		ch.Nodes = append(ch.Nodes, n)
	}
	if !ok {
		return nil
	}
	return ch
}

// segment reads one element of a chain: a layer with its arguments, a
// repeat (3 * (...) or 3 * layer), or a parenthesised group.
func (c *checker) segment(seg []ast.Expr) ChainNode {
	r := diag.Join(seg[0].Rng(), seg[len(seg)-1].Rng())
	if n, ok := seg[0].(*ast.Number); ok && len(seg) >= 3 {
		if star, ok := seg[1].(*ast.Punct); ok && star.Op == "*" {
			if !n.IsInt || n.Int < 1 || n.Unit != "" {
				c.errorf(n.Range, "bad-repeat", "repeat count must be a positive integer",
					"Write N * (layers), as in 3 * (conv 64 k3 -> relu); found %s.", n.Text)
				return nil
			}
			if n.Int > 10000 {
				c.errorf(n.Range, "bad-repeat", "repeat count too large",
					"%d repeats is more than pipe builds (10000 at most).", n.Int)
				return nil
			}
			var body *Chain
			if p, ok := seg[2].(*ast.Paren); ok && len(seg) == 3 {
				body = c.chain(p.Words, p.Range, fromNone)
			} else {
				body = c.chain(seg[2:], diag.Join(seg[2].Rng(), seg[len(seg)-1].Rng()), fromNone)
			}
			if body == nil {
				return nil
			}
			return &Repeat{Count: int(n.Int), Body: body, Range: r}
		}
	}
	if p, ok := seg[0].(*ast.Paren); ok && len(seg) == 1 {
		inner := c.chain(p.Words, p.Range, fromNone)
		if inner == nil {
			return nil
		}
		return &Repeat{Count: 1, Body: inner, Range: r}
	}
	id, ok := seg[0].(*ast.Ident)
	if !ok {
		c.errorf(seg[0].Rng(), "expected-layer", "expected a layer",
			"A chain holds layers such as conv 32 k3 or relu, joined by '->'; found %s.", describe(seg[0]))
		return nil
	}
	spec := c.schema.Layer(id.Name)
	if spec == nil {
		c.unknown(id.Range, "unknown-layer", "layer", id.Name, c.schema.LayerNames(), "a layer or a model family")
		return nil
	}
	call := &LayerCall{Name: spec.Name, Spec: spec, Range: r, NameRange: id.Range}
	call.Args = c.args(spec.Args, seg[1:], spec.Name, "", id.Range)
	return call
}

// String renders a chain for messages: "conv -> relu".
func (ch *Chain) String() string {
	var parts []string
	if ch.From != "" {
		parts = append(parts, ch.From)
	}
	for _, n := range ch.Nodes {
		switch n := n.(type) {
		case *LayerCall:
			parts = append(parts, n.Name)
		case *Repeat:
			parts = append(parts, fmt.Sprintf("%d * (%s)", n.Count, n.Body))
		}
	}
	return strings.Join(parts, " -> ")
}
