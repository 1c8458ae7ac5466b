package lang

import (
	"sort"

	"pipe/diag"
	"pipe/lang/ast"
)

// Program is a checked .pipe file: every field resolved against the schema
// and typed. The planner reads it; nothing in it needs the syntax tree, but
// every part keeps its source range for diagnostics.
type Program struct {
	File *ast.File
	// Name is the pipeline's name ("pipeline NAME"), or the file's base
	// name when the file does not say.
	Name string
	// Top holds the fields written outside any block: pipeline, device,
	// precision, seed.
	Top *Block
	// Blocks in source order.
	Blocks []*Block
	// Models are the model blocks, also in Blocks.
	Models []*Model
}

// BlocksOf returns the blocks with the given keyword, in source order.
func (p *Program) BlocksOf(kind string) []*Block {
	var out []*Block
	for _, b := range p.Blocks {
		if b.Kind == kind {
			out = append(out, b)
		}
	}
	return out
}

// TrainSource is the source train reads: the one its source field names,
// else the source named train, else the only source; nil when none is
// (the checker reports that). The planner and the executor both follow it.
func (p *Program) TrainSource() *Block {
	if v := p.Block("train").Arg("source", "source"); v != nil {
		return p.Named("source", v.Str)
	}
	if b := p.Named("source", "train"); b != nil {
		return b
	}
	if srcs := p.BlocksOf("source"); len(srcs) == 1 {
		return srcs[0]
	}
	return nil
}

// Block returns the first block with the given keyword, or nil.
func (p *Program) Block(kind string) *Block {
	for _, b := range p.Blocks {
		if b.Kind == kind {
			return b
		}
	}
	return nil
}

// Named returns the block with the given keyword and name, or nil.
func (p *Program) Named(kind, name string) *Block {
	for _, b := range p.Blocks {
		if b.Kind == kind && b.Name() == name {
			return b
		}
	}
	return nil
}

// Model returns the model with the given name, or nil.
func (p *Program) Model(name string) *Model {
	for _, m := range p.Models {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Block is a checked block: its keyword, labels and fields.
type Block struct {
	Kind   string
	Spec   *BlockSpec
	Labels []Label
	Fields []*Field
	// Range covers the whole block; KindRange the keyword.
	Range     diag.Range
	KindRange diag.Range
	// Model is set for model blocks.
	Model *Model
}

// Label is one label of a block ("scene", "geotiff").
type Label struct {
	Name  string
	Value string
	Range diag.Range
}

// Name returns the block's first label that declares a name, or "".
func (b *Block) Name() string { return b.Label("name") }

// Label returns the value of the label with the given spec name, or "".
func (b *Block) Label(name string) string {
	for _, l := range b.Labels {
		if l.Name == name {
			return l.Value
		}
	}
	return ""
}

// Field returns the field with the given name, or nil.
func (b *Block) Field(name string) *Field {
	if b == nil {
		return nil
	}
	for _, f := range b.Fields {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// FieldsNamed returns every field with the given name, in source order:
// more than one only for a repeatable field.
func (b *Block) FieldsNamed(name string) []*Field {
	if b == nil {
		return nil
	}
	var out []*Field
	for _, f := range b.Fields {
		if f.Name == name {
			out = append(out, f)
		}
	}
	return out
}

// Arg returns the named argument of the named field, or nil: the short way
// to read a setting such as train.Arg("optimizer", "lr").
func (b *Block) Arg(field, arg string) *Value {
	f := b.Field(field)
	if f == nil {
		return nil
	}
	return f.Args[arg]
}

// Field is a checked field: a name and its arguments by name.
type Field struct {
	Name      string
	Spec      *FieldSpec
	Args      Args
	Range     diag.Range
	NameRange diag.Range
}

// First returns the field's first declared argument (its main value), or
// nil when it was not given.
func (f *Field) First() *Value {
	if f == nil || len(f.Spec.Args) == 0 {
		return nil
	}
	return f.Args[f.Spec.Args[0].Name]
}

// Args maps argument names to their values. Only arguments written in the
// source are present.
type Args map[string]*Value

// Value is a typed argument value.
type Value struct {
	Type Type
	// Int holds TInt, TBytes, and TSize of one extent.
	Int int64
	// Float holds TFloat, TBandwidth (bytes/s), TFlops (FLOP/s) and
	// TDuration (seconds, with Int its nanoseconds); for TInt it holds the
	// same number as Int.
	Float float64
	// Str holds TString, TEnum and TName, and a TWord as written (a
	// string with its quotes).
	Str  string
	Bool bool
	// Dims holds TSize and TShape.
	Dims []int64
	// List holds TList elements.
	List []*Value
	// Auto is set for "auto"; AutoMin and AutoMax hold its bounds when
	// written (auto(min 8 max 256)).
	Auto             bool
	AutoMin, AutoMax *float64
	// Tensor holds a TTensor: a named tensor, optionally followed by a
	// branch of layers.
	Tensor *Chain
	Range  diag.Range
}

// Model is a checked model block: an input shape and statements of layer
// chains. A model named after a stdlib family whose body only sets that
// family's arguments becomes one statement calling the family.
type Model struct {
	Name      string
	NameRange diag.Range
	Range     diag.Range
	// Input is the shape of one sample, without the batch dimension. Nil
	// when the model does not say (a family may have a default).
	Input      []int64
	InputRange diag.Range
	Stmts      []*ModelStmt
	// Fields are the model's other fields (such as "init").
	Fields []*Field
}

// Calls lists every layer and family call of the model in source order,
// each once: a repeated chain's calls appear once however many copies run,
// and the calls of a branch (add(x -> conv 64 k1)) follow the call that
// takes it.
func (m *Model) Calls() []*LayerCall {
	var out []*LayerCall
	var walk func(ch *Chain)
	walk = func(ch *Chain) {
		if ch == nil {
			return
		}
		for _, n := range ch.Nodes {
			switch n := n.(type) {
			case *LayerCall:
				out = append(out, n)
				names := make([]string, 0, len(n.Args))
				for name := range n.Args {
					names = append(names, name)
				}
				sort.Strings(names)
				for _, name := range names {
					if v := n.Args[name]; v.Tensor != nil {
						walk(v.Tensor)
					}
				}
			case *Repeat:
				walk(n.Body)
			}
		}
	}
	for _, st := range m.Stmts {
		walk(st.Chain)
	}
	return out
}

// ModelStmt is one statement of a model: a chain of layers that continues
// from the previous statement's output, optionally labelled so a later
// layer can refer to its output (skip connections, residual adds).
type ModelStmt struct {
	Label      string
	LabelRange diag.Range
	Chain      *Chain
	Range      diag.Range
}

// Chain is a sequence of layers joined by "->". From names the tensor the
// chain starts from when it is a branch ("x" in add(x -> conv 64 k1));
// it is empty for a chain that continues the model's main flow.
type Chain struct {
	From      string
	FromRange diag.Range
	Nodes     []ChainNode
	Range     diag.Range
}

// ChainNode is a *LayerCall or a *Repeat.
type ChainNode interface {
	Rng() diag.Range
	chainNode()
}

// LayerCall is one use of a layer or family with its arguments.
type LayerCall struct {
	Name      string
	Spec      *LayerSpec
	Args      Args
	Range     diag.Range
	NameRange diag.Range
}

// Repeat is "N * (chain)": the chain applied N times in sequence, each
// copy with its own parameters.
type Repeat struct {
	Count int
	Body  *Chain
	Range diag.Range
}

// Rng implements ChainNode.
func (l *LayerCall) Rng() diag.Range { return l.Range }

// Rng implements ChainNode.
func (r *Repeat) Rng() diag.Range { return r.Range }

func (*LayerCall) chainNode() {}
func (*Repeat) chainNode()    {}
