package stdlib

import (
	"fmt"
	"strings"

	"pipe/diag"
	"pipe/lang"
)

// builder holds the state of one BuildGraph call.
// MaxNodes bounds the operations of one model graph, so a file such as
// "10000 * (10000 * (dense 4))" is refused instead of exhausting memory.
// ResNet-152 has about 500; ViT-H about 1,000.
const MaxNodes = 100000

type builder struct {
	g      *Graph
	diags  diag.Diagnostics
	tooBig bool
	// taken counts the uses of each node name; counts numbers the
	// hand-written layers of each kind.
	taken  map[string]int
	counts map[string]int
	// labels maps each label defined so far to its node, -1 when the
	// statement it labels failed; order keeps them in definition order.
	labels map[string]int
	order  []string
	// later holds every label of the model, for "defined after this use".
	later map[string]diag.Range
	// bare is set when the model is one family call, whose nodes then go
	// without a prefix so their names match the reference implementation.
	bare bool
	// rng and layer describe the layer call being built.
	rng   diag.Range
	layer string
}

func buildGraph(m *lang.Model) (*Graph, diag.Diagnostics) {
	b := &builder{
		g:      &Graph{Labels: map[string]int{}},
		taken:  map[string]int{},
		counts: map[string]int{},
		labels: map[string]int{},
		later:  map[string]diag.Range{},
	}
	for _, st := range m.Stmts {
		if st.Label != "" {
			if _, ok := b.later[st.Label]; !ok {
				b.later[st.Label] = st.LabelRange
			}
		}
	}
	calls := m.Calls()
	if len(calls) == 1 {
		if call := calls[0]; isFamily(call.Name) {
			b.bare = true
		}
	}
	input := m.Input
	b.rng, b.layer = m.InputRange, "input"
	if input == nil {
		if len(calls) > 0 && m.Stmts[0].Chain != nil && m.Stmts[0].Chain.From == "" && firstCall(m.Stmts[0].Chain) == calls[0] {
			input = familyInput[calls[0].Name]
		}
		if input == nil {
			b.rng = m.NameRange
			b.errorf("missing-input", fmt.Sprintf("model %s needs an input shape", m.Name),
				"Add a line to the model: input [C, H, W] for images or input [F] for vectors, the shape of one sample.")
			return b.g, b.diags
		}
	}
	for _, d := range input {
		if d < 1 {
			b.errorf("bad-shape", "input extents must be positive", "The input %s has an extent below 1.", shapeStr(input))
			return b.g, b.diags
		}
	}
	b.g.Input = cloneShape(input)
	var cc calc
	in := b.push(&Node{Name: "input", Op: "input", Out: cloneShape(input), Range: b.rng, Layer: "input"}, &cc)
	if in < 0 {
		return b.g, b.diags
	}
	cur := in
	for _, st := range m.Stmts {
		if st.Chain == nil {
			continue
		}
		start := cur
		if st.Chain.From != "" {
			start = b.lookup(st.Chain.From, st.Chain.FromRange)
		}
		out := b.chain(st.Chain.Nodes, start)
		if st.Label != "" {
			b.define(st.Label, st.LabelRange, out)
		}
		cur = out
	}
	b.g.Output = cur
	if cur < 0 {
		b.g.Output = len(b.g.Nodes) - 1
	}
	return b.g, b.diags
}

// firstCall returns the first layer call of a chain, looking into repeats.
func firstCall(ch *lang.Chain) *lang.LayerCall {
	for _, n := range ch.Nodes {
		switch n := n.(type) {
		case *lang.LayerCall:
			return n
		case *lang.Repeat:
			return firstCall(n.Body)
		}
	}
	return nil
}

func isFamily(name string) bool {
	l := registry.Layer(name)
	return l != nil && l.Family
}

func (b *builder) errorf(code, summary, detail string, args ...any) {
	b.diags = append(b.diags, diag.Errorf(b.rng, code, summary, detail, args...))
}

// shapeErr reports a shape mismatch at the current layer and returns -1.
func (b *builder) shapeErr(summary, detail string, args ...any) int {
	b.errorf("shape-mismatch", summary, detail, args...)
	return -1
}

// notVector reports that op, which maps a vector, was given the shape in.
func (b *builder) notVector(op string, in []int64) int {
	return b.shapeErr(op+" needs a vector", op+" expects a vector per sample but gets %s; add 'flatten ->' before it%s.", shapeStr(in), gapHint(in))
}

// badArg reports an argument the shape rules cannot use and returns -1.
func (b *builder) badArg(v *lang.Value, summary, detail string, args ...any) int {
	r := b.rng
	if v != nil && !v.Range.IsZero() {
		r = v.Range
	}
	b.diags = append(b.diags, diag.Errorf(r, "bad-arg", summary, detail, args...))
	return -1
}

// uniq returns name, or name#2, name#3... when it is taken: a module used
// twice, such as torchvision's shared relu in a residual block.
func (b *builder) uniq(name string) string {
	b.taken[name]++
	if n := b.taken[name]; n > 1 {
		alt := fmt.Sprintf("%s#%d", name, n)
		for b.taken[alt] > 0 {
			b.taken[name]++
			alt = fmt.Sprintf("%s#%d", name, b.taken[name])
		}
		b.taken[alt]++
		return alt
	}
	return name
}

// numbered returns the next name for a hand-written layer: conv1, conv2;
// resnet18_1 for a name that ends in a digit.
func (b *builder) numbered(kind string) string {
	b.counts[kind]++
	sep := ""
	if last := kind[len(kind)-1]; last >= '0' && last <= '9' {
		sep = "_"
	}
	return fmt.Sprintf("%s%s%d", kind, sep, b.counts[kind])
}

// define binds a label to a node.
func (b *builder) define(label string, r diag.Range, id int) {
	if _, dup := b.labels[label]; dup || label == "input" {
		b.rng = r
		detail := "It already names an earlier tensor; give this one another name."
		if label == "input" {
			detail = "'input' names the model's input; give this tensor another name."
		}
		b.errorf("duplicate-label", fmt.Sprintf("tensor '%s' is labelled twice", label), "%s", detail)
		return
	}
	b.labels[label] = id
	b.order = append(b.order, label)
	if id >= 0 {
		b.g.Labels[label] = id
	}
}

// lookup resolves a label used at r, reporting an unknown one. "input"
// names the model's input unless a statement labels a tensor so.
func (b *builder) lookup(label string, r diag.Range) int {
	if id, ok := b.labels[label]; ok {
		return id
	}
	if label == "input" {
		return 0
	}
	b.rng = r
	defined := append([]string(nil), b.order...)
	var detail string
	if len(defined) == 0 {
		detail = fmt.Sprintf("No tensor named '%s' is defined before this line, and none is labelled yet; label a statement's output with %s = ....", label, label)
	} else {
		detail = fmt.Sprintf("No tensor named '%s' is defined before this line; defined: %s.", label, strings.Join(defined, ", "))
	}
	if at, ok := b.later[label]; ok {
		detail += fmt.Sprintf(" '%s' is labelled at line %d, after this use; a layer can read only tensors defined above it.", label, at.Start.Line)
	}
	sug := lang.Nearest(label, append(defined, "input"))
	if sug != "" && b.later[label].IsZero() {
		detail += fmt.Sprintf(" Did you mean '%s'?", sug)
	}
	d := diag.Errorf(r, "unknown-tensor", fmt.Sprintf("unknown tensor '%s'", label), "%s", detail)
	d.Suggestion = sug
	b.diags = append(b.diags, d)
	return -1
}

// chain applies a chain's nodes to the tensor x.
func (b *builder) chain(nodes []lang.ChainNode, x int) int {
	for _, n := range nodes {
		switch n := n.(type) {
		case *lang.LayerCall:
			x = b.call(n, x)
		case *lang.Repeat:
			for i := 0; i < n.Count && !b.tooBig; i++ {
				x = b.chain(n.Body.Nodes, x)
			}
		}
	}
	return x
}

// Argument readers: the value written, or the default.

func argInt(c *lang.LayerCall, name string, def int64) int64 {
	if v := c.Args[name]; v != nil {
		return v.Int
	}
	return def
}

func argFloat(c *lang.LayerCall, name string, def float64) float64 {
	if v := c.Args[name]; v != nil {
		return v.Float
	}
	return def
}

func argBool(c *lang.LayerCall, name string, def bool) bool {
	if v := c.Args[name]; v != nil {
		return v.Bool
	}
	return def
}

func argStr(c *lang.LayerCall, name, def string) string {
	if v := c.Args[name]; v != nil && v.Str != "" {
		return v.Str
	}
	return def
}

func argInts(c *lang.LayerCall, name string) ([]int64, *lang.Value) {
	v := c.Args[name]
	if v == nil {
		return nil, nil
	}
	out := make([]int64, len(v.List))
	for i, e := range v.List {
		out[i] = e.Int
	}
	return out, v
}

// call builds one layer or family call on the tensor x.
func (b *builder) call(c *lang.LayerCall, x int) int {
	b.rng, b.layer = c.Range, c.Name
	name := c.Name
	if spec := registry.Layer(name); spec != nil {
		name = spec.Name // an alias builds its layer
	}
	if isFamily(name) {
		return b.family(c, name, x)
	}
	if l := layerOps[name]; l != nil && l.build != nil {
		return l.build(b, c, x)
	}
	return b.shapeErr("unknown layer", "pipe has no shape rule for layer '%s'.", c.Name)
}

// gapHint adds a pointer to gap for a feature map.
func gapHint(in []int64) string {
	if len(in) == 3 {
		return ", or 'gap ->' to average each channel"
	}
	return ""
}
