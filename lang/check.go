package lang

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"pipe/diag"
	"pipe/lang/ast"
	"pipe/lang/syntax"
)

// Parse parses a .pipe file. It returns every statement it could parse
// and a diagnostic for each syntax error; see package syntax.
func Parse(filename string, src []byte) (*ast.File, diag.Diagnostics) {
	return syntax.Parse(filename, src)
}

// Check gives a parsed file its meaning: every block, field, layer and
// argument is looked up in the schema, typed and bounded; names are made
// unique and references resolved; and each model's shapes are checked. It
// returns the program built from everything that checked, and a diagnostic
// for everything that did not.
func Check(f *ast.File, schema Schema) (*Program, diag.Diagnostics) {
	c := &checker{schema: schema}
	p := c.check(f)
	c.diags.Sort()
	return p, c.diags
}

// topOwner names the top level of the file in messages.
const topOwner = "the file"

type checker struct {
	schema Schema
	diags  diag.Diagnostics
	// siblings are the fields of the block whose field is being read, so
	// that a word that belongs to another of them can say so.
	siblings []*FieldSpec
}

func (c *checker) errorf(r diag.Range, code, summary, detail string, args ...any) {
	c.diags = append(c.diags, diag.Errorf(r, code, summary, detail, args...))
}

func (c *checker) warnf(r diag.Range, code, summary, detail string, args ...any) {
	c.diags = append(c.diags, diag.Warnf(r, code, summary, detail, args...))
}

func (c *checker) unknown(r diag.Range, code, what, name string, candidates []string, context string) {
	hint, sug := didYouMean(name, candidates)
	detail := strings.TrimSpace(fmt.Sprintf("%s %s is not %s. %s", strings.ToUpper(what[:1])+what[1:], quote(name), context, hint))
	c.diags = append(c.diags, &diag.Diagnostic{Severity: diag.Error, Code: code,
		Summary: fmt.Sprintf("unknown %s %s", what, quote(name)), Detail: detail, Subject: &r, Suggestion: sug})
}

func (c *checker) check(f *ast.File) *Program {
	p := &Program{File: f}
	p.Top = &Block{Kind: "", Spec: &BlockSpec{Name: "file", Fields: c.schema.TopFields()}, Range: f.Range}
	for _, s := range f.Stmts {
		if s.Label != nil {
			c.errorf(s.Label.Range, "misplaced-label", "label outside a model",
				"%s = ... names a tensor, which only a model's body can do.", s.Label.Name)
			continue
		}
		head, ok := s.Words[0].(*ast.Ident)
		if !ok {
			c.errorf(s.Words[0].Rng(), "syntax", "expected a block or a field name",
				"A statement starts with a name such as source, model, train or precision; found %s.", describe(s.Words[0]))
			continue
		}
		if s.Body != nil {
			spec := c.schema.Block(head.Name)
			if spec == nil {
				c.unknown(head.Range, "unknown-block", "block", head.Name, c.schema.BlockNames(), "a block of pipe")
				continue
			}
			if b := c.block(spec, s); b != nil {
				p.Blocks = append(p.Blocks, b)
				if b.Model != nil {
					p.Models = append(p.Models, b.Model)
				}
			}
			continue
		}
		if spec := c.schema.Block(head.Name); spec != nil && findField(c.schema.TopFields(), head.Name) == nil {
			c.errorf(head.Range, "missing-body", fmt.Sprintf("%s needs a body", head.Name),
				"Write the %s block's settings in braces: %s { ... }.", head.Name, head.Name)
			continue
		}
		c.fields(p.Top, p.Top.Spec.Fields, s.Words, topOwner)
	}
	c.finish(p)
	return p
}

func findField(specs []*FieldSpec, name string) *FieldSpec {
	for _, f := range specs {
		if f.Name == name {
			return f
		}
	}
	return nil
}

func fieldNames(specs []*FieldSpec) []string {
	out := make([]string, len(specs))
	for i, f := range specs {
		out[i] = f.Name
	}
	return out
}

// block checks one block statement: its labels, then its body.
func (c *checker) block(spec *BlockSpec, s *ast.Stmt) *Block {
	head := s.Words[0].(*ast.Ident)
	b := &Block{Kind: spec.Name, Spec: spec, Range: s.Range, KindRange: head.Range}
	words := s.Words[1:]
	for i, ls := range spec.Labels {
		if i >= len(words) {
			if !ls.Optional {
				r := head.Range
				if len(s.Words) > 1 {
					r = s.Words[len(s.Words)-1].Rng()
				}
				c.errorf(r, "missing-label", fmt.Sprintf("%s needs a %s", spec.Name, ls.Name),
					"Write it as: %s.", labelUsage(spec))
				return nil
			}
			continue
		}
		id, ok := words[i].(*ast.Ident)
		if !ok {
			c.errorf(words[i].Rng(), "bad-label", fmt.Sprintf("the %s of a %s must be a name", ls.Name, spec.Name),
				"Found %s. Write it as: %s.", describe(words[i]), labelUsage(spec))
			return nil
		}
		if len(ls.Enum) > 0 && !contains(ls.Enum, id.Name) {
			c.unknown(id.Range, "unknown-kind", spec.Name+" "+ls.Name, id.Name, ls.Enum, "known to pipe")
			return nil
		}
		b.Labels = append(b.Labels, Label{Name: ls.Name, Value: id.Name, Range: id.Range})
	}
	if len(words) > len(spec.Labels) {
		extra := words[len(spec.Labels)]
		c.errorf(extra.Rng(), "extra-label", fmt.Sprintf("too many names before the %s body", spec.Name),
			"Write it as: %s. Settings go inside the braces.", labelUsage(spec))
		return nil
	}
	variant := ""
	if len(spec.Variants) > 0 && spec.VariantLabel < len(b.Labels) {
		variant = b.Labels[spec.VariantLabel].Value
	}
	if spec.Body == BodyModel {
		c.model(b, s.Body)
		return b
	}
	specs := spec.FieldsFor(variant)
	owner := spec.Name
	if n := b.Name(); n != "" {
		owner = spec.Name + " " + n
	}
	for _, st := range s.Body.Stmts {
		if st.Label != nil {
			c.errorf(st.Label.Range, "misplaced-label", "label outside a model",
				"%s = ... names a tensor, which only a model's body can do.", st.Label.Name)
			continue
		}
		if st.Body != nil {
			c.errorf(st.Body.Range, "nested-block", fmt.Sprintf("a %s cannot hold a block", spec.Name),
				"Blocks are written at the top of the file, not inside %s.", spec.Name)
			continue
		}
		c.fields(b, specs, st.Words, owner)
	}
	c.required(b, specs, owner)
	return b
}

func labelUsage(spec *BlockSpec) string {
	parts := []string{spec.Name}
	for _, l := range spec.Labels {
		n := strings.ToUpper(l.Name)
		if len(l.Enum) > 0 {
			n = strings.Join(l.Enum, "|")
		}
		if l.Optional {
			n = "[" + n + "]"
		}
		parts = append(parts, n)
	}
	return strings.Join(parts, " ") + " { ... }"
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func (c *checker) required(b *Block, specs []*FieldSpec, owner string) {
	for _, fs := range specs {
		if fs.Required && b.Field(fs.Name) == nil {
			usage := fs.Name
			if len(fs.Args) > 0 {
				usage += " " + placeholder(fs.Args[0])
			}
			c.errorf(b.KindRange, "missing-field", fmt.Sprintf("%s needs %s", owner, fs.Name),
				"Add a line: %s. (%s)", usage, fs.Doc)
		}
	}
}

func placeholder(a *ArgSpec) string {
	switch a.Type {
	case TString:
		return `"path"`
	case TInt:
		return "N"
	case TFloat:
		return "X"
	case TEnum:
		return strings.Join(a.Choices(), "|")
	case TShape:
		return "[C, H, W]"
	case TBytes:
		return "24GiB"
	case TBandwidth:
		return "900GB/s"
	case TList:
		return "[...]"
	}
	return strings.ToUpper(a.Name)
}

// fields splits the words of one line into fields. A word that names a
// field of the block starts a new field, unless the current field is
// still waiting for its first argument or knows the word as one of its own
// argument names.
func (c *checker) fields(b *Block, specs []*FieldSpec, words []ast.Expr, owner string) {
	i := 0
	for i < len(words) {
		id, ok := words[i].(*ast.Ident)
		if !ok {
			c.errorf(words[i].Rng(), "expected-field", "expected a field name",
				"In %s, a setting starts with its name; found %s. Known settings: %s.",
				owner, describe(words[i]), strings.Join(fieldNames(specs), ", "))
			i = nextField(specs, words, i+1, nil)
			continue
		}
		fs := findField(specs, id.Name)
		if fs == nil {
			c.unknown(id.Range, "unknown-field", "setting", id.Name, fieldNames(specs), "a setting of "+owner)
			i = nextField(specs, words, i+1, nil)
			continue
		}
		end := nextField(specs, words, i+1, fs)
		f := &Field{Name: fs.Name, Spec: fs, NameRange: id.Range, Range: id.Range}
		if end > i+1 {
			f.Range = diag.Join(id.Range, words[end-1].Rng())
		}
		c.siblings = specs
		f.Args = c.args(fs.Args, words[i+1:end], fs.Name, owner, id.Range)
		c.siblings = nil
		if prev := b.Field(fs.Name); prev != nil && !fs.Repeatable {
			c.errorf(id.Range, "duplicate-field", fmt.Sprintf("%s is set twice", fs.Name),
				"%s already sets %s at line %d; remove one of them.", owner, fs.Name, prev.NameRange.Start.Line)
		} else {
			b.Fields = append(b.Fields, f)
		}
		i = end
	}
}

// nextField returns the index of the word that starts the next field.
func nextField(specs []*FieldSpec, words []ast.Expr, from int, cur *FieldSpec) int {
	for j := from; j < len(words); j++ {
		id, ok := words[j].(*ast.Ident)
		if !ok || findField(specs, id.Name) == nil {
			continue
		}
		if cur != nil {
			if j == from && hasPositional(cur) {
				continue // the field's first value happens to be a field's name
			}
			if id.Name != cur.Name && cur.Arg(id.Name) != nil {
				continue
			}
		}
		return j
	}
	return len(words)
}

func hasPositional(f *FieldSpec) bool {
	for _, a := range f.Args {
		if a.Positional {
			return true
		}
	}
	return false
}

// args reads the arguments of a field or a layer: positional ones first, in
// order, then named ones ("lr 1e-3"), glued ones ("k3") and flags
// ("nesterov").
func (c *checker) args(specs []*ArgSpec, words []ast.Expr, name, owner string, at diag.Range) Args {
	out := Args{}
	var positional []*ArgSpec
	for _, a := range specs {
		if a.Positional {
			positional = append(positional, a)
		}
	}
	who := name
	if owner != "" && owner != topOwner {
		who = name + " in " + owner
	}
	tried := map[string]bool{}
	written := map[string]diag.Range{}
	set := func(a *ArgSpec, v *Value, r diag.Range) {
		tried[a.Name] = true
		if v == nil {
			return
		}
		if _, dup := out[a.Name]; dup {
			c.errorf(r, "duplicate-arg", fmt.Sprintf("%s is given twice", a.Name),
				"%s already has a value for %s.", who, a.Name)
			return
		}
		out[a.Name] = v
		written[a.Name] = diag.Join(r, v.Range)
	}
	k := 0
	for i := 0; i < len(words); {
		w := words[i]
		if id, ok := w.(*ast.Ident); ok {
			if a := FindArg(specs, id.Name); a != nil && !(k < len(positional) && enumHas(positional[k], id.Name)) {
				k = len(positional)
				if a.Type == TBool {
					v := &Value{Type: TBool, Bool: true, Range: id.Range}
					if i+1 < len(words) {
						if b, ok := words[i+1].(*ast.Ident); ok && (b.Name == "true" || b.Name == "false") {
							v = &Value{Type: TBool, Bool: b.Name == "true", Range: diag.Join(id.Range, b.Range)}
							i++
						}
					}
					set(a, v, id.Range)
					i++
					continue
				}
				if i+1 >= len(words) {
					c.errorf(id.Range, "missing-value", fmt.Sprintf("%s needs a value", id.Name),
						"Write %s %s. %s", id.Name, placeholder(a), a.Doc)
					i++
					continue
				}
				v, n := c.parseValue(a, words, i+1, who)
				set(a, v, id.Range)
				i += 1 + n
				continue
			}
			if m := gluedArg.FindStringSubmatch(id.Name); m != nil {
				if a := FindArg(specs, m[1]); a != nil && a.Glued {
					n, _ := strconv.ParseInt(m[2], 10, 64)
					v := &Value{Type: TInt, Int: n, Float: float64(n), Range: id.Range}
					c.checkBounds(v, a, who)
					set(a, v, id.Range)
					i++
					continue
				}
			}
		}
		if k < len(positional) {
			a := positional[k]
			k++
			v, n := c.parseValue(a, words, i, who)
			set(a, v, w.Rng())
			i += n
			continue
		}
		if c.misspeltSetting(w, specs, words[i+1:], owner) {
			break // the words after it are that setting's
		}
		c.extraArg(w, specs, who)
		i++
	}
	for _, a := range specs {
		if a.Required && out[a.Name] == nil && !tried[a.Name] {
			c.errorf(at, "missing-arg", fmt.Sprintf("%s needs %s", who, a.Name),
				"Write %s %s. %s", name, placeholder(a), a.Doc)
		}
	}
	c.kindArgs(specs, out, written, name)
	return out
}

// kindArgs reports the arguments written that the chosen kind does not
// take (optimizer adam momentum 0.9: momentum is sgd's).
func (c *checker) kindArgs(specs []*ArgSpec, out Args, written map[string]diag.Range, name string) {
	ka := KindArg(specs)
	if ka == nil {
		return
	}
	kind := ka.Default
	if v := out[ka.Name]; v != nil {
		kind = v.Str
	}
	if !contains(ka.Choices(), kind) {
		return
	}
	var takes []string
	for _, a := range ArgsOfKind(specs, kind) {
		if a != ka {
			takes = append(takes, a.Name)
		}
	}
	for _, a := range specs {
		if out[a.Name] == nil || a.TakenBy(kind) {
			continue
		}
		c.errorf(written[a.Name], "arg-not-for-kind", fmt.Sprintf("%s %s takes no %s", name, kind, a.Name),
			"%s is an argument of %s %s only; %s %s takes %s. Remove %s, or choose %s %s.",
			a.Name, name, orList(a.Kinds), name, kind, strings.Join(takes, ", "), a.Name, name, orList(a.Kinds))
	}
}

// orList joins names as "a", "a or b", "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func enumHas(a *ArgSpec, name string) bool { return a.Type == TEnum && contains(a.Choices(), name) }

// misspeltSetting reports w, a word nearer no argument of specs, as a
// misspelt setting of the block when one is near it, or as an unknown
// one when no argument is near and words follow it: on a shared line
// (train { batch 64 optimizr adam lr 1e-3 }) the parser gave it and
// the words after it to the setting before, and one error saying so
// stands for what would be one per word.
func (c *checker) misspeltSetting(w ast.Expr, specs []*ArgSpec, rest []ast.Expr, owner string) bool {
	id, ok := w.(*ast.Ident)
	if !ok || len(c.siblings) == 0 {
		return false
	}
	var args, settings []string
	for _, a := range specs {
		args = append(args, a.Name)
	}
	for _, fs := range c.siblings {
		if fs.Arg(id.Name) != nil {
			return false // another setting's argument: extraArg says whose
		}
		settings = append(settings, fs.Name)
	}
	a := nearest(id.Name, args)
	near := nearest(id.Name, settings)
	switch {
	case near == "" && (a != "" || len(rest) == 0):
		return false // a stray word, or a misspelt argument: extraArg's
	case near != "" && a != "" && distance(id.Name, a) <= distance(id.Name, near):
		return false // nearer an argument of its own setting
	}
	hint, _ := didYouMean(id.Name, settings)
	if near == "" {
		hint = fmt.Sprintf("%s has no setting %s. %s", owner, quote(id.Name), hint)
	}
	if len(rest) > 0 {
		var ws []string
		for _, r := range rest {
			ws = append(ws, describeWord(r))
		}
		hint += fmt.Sprintf(" The words after it (%s) are taken as its value.", strings.Join(ws, " "))
	}
	c.errorf(id.Range, "unknown-setting", fmt.Sprintf("unknown setting %s in %s", quote(id.Name), owner), "%s", hint)
	return true
}

// describeWord is a word as it was written, for a message.
func describeWord(w ast.Expr) string {
	switch v := w.(type) {
	case *ast.Ident:
		return v.Name
	case *ast.Number:
		return v.Text
	case *ast.Size:
		return v.Text
	}
	return describe(w)
}

func (c *checker) extraArg(w ast.Expr, specs []*ArgSpec, who string) {
	var names []string
	for _, a := range specs {
		names = append(names, a.Name)
	}
	if id, ok := w.(*ast.Ident); ok {
		// An argument of another setting of the block (train { batch 64
		// lr 1e-3 }, where lr belongs to optimizer) says where it goes.
		for _, fs := range c.siblings {
			if a := fs.Arg(id.Name); a != nil && !a.Positional && FindArg(specs, id.Name) == nil {
				c.errorf(id.Range, "unknown-arg", fmt.Sprintf("unknown argument %s", quote(id.Name)),
					"%s is not an argument of %s: it belongs to %s. Write it in that setting: %s ... %s %s.",
					quote(id.Name), who, fs.Name, fs.Name, id.Name, placeholder(a))
				return
			}
		}
		// Positional arguments are written without their names: listing
		// them as names to write would mislead.
		var named []string
		for _, a := range specs {
			if !a.Positional {
				named = append(named, a.Name)
			}
		}
		c.unknown(id.Range, "unknown-arg", "argument", id.Name, named, "an argument of "+who)
		return
	}
	detail := fmt.Sprintf("%s takes no further value here; found %s.", who, describe(w))
	if len(names) > 0 {
		detail += " Its arguments are " + strings.Join(names, ", ") + "."
	}
	c.errorf(w.Rng(), "extra-arg", "unexpected value", "%s", detail)
}

// finish runs the checks that need the whole file: unique names, single
// blocks, references between blocks, and the pipeline's name.
func (c *checker) finish(p *Program) {
	seen := map[string]*Block{}
	for _, b := range p.Blocks {
		key := b.Kind
		if !b.Spec.Once {
			n := b.Name()
			if n == "" {
				continue
			}
			key = b.Kind + " " + n
		}
		if prev, dup := seen[key]; dup {
			what := "a " + b.Kind + " block"
			if !b.Spec.Once {
				what = b.Kind + " " + quote(b.Name())
			}
			c.errorf(b.KindRange, "duplicate", fmt.Sprintf("duplicate %s", key),
				"The file already declares %s at line %d; each may appear once.", what, prev.KindRange.Start.Line)
			continue
		}
		seen[key] = b
	}
	p.Name = strings.TrimSuffix(filepath.Base(p.File.Name), filepath.Ext(p.File.Name))
	if v := p.Top.Arg("pipeline", "name"); v != nil {
		p.Name = v.Str
	} else if f := p.Top.Field("pipeline"); f != nil && f.First() != nil {
		p.Name = f.First().Str
	}
	c.references(p)
}

// sourceNames lists the declared sources.
func sourceNames(p *Program) []string {
	var out []string
	for _, b := range p.BlocksOf("source") {
		out = append(out, b.Name())
	}
	return out
}

func (c *checker) references(p *Program) {
	sources := sourceNames(p)
	var models []string
	for _, m := range p.Models {
		models = append(models, m.Name)
	}
	for _, b := range p.Blocks {
		if f := b.Field("source"); f != nil {
			if v := f.First(); v != nil && !contains(sources, v.Str) {
				c.unknown(v.Range, "unknown-source", "source", v.Str, sources, "declared in this file")
			}
		}
		if f := b.Field("model"); f != nil {
			if v := f.First(); v != nil && !contains(models, v.Str) {
				c.unknown(v.Range, "unknown-model", "model", v.Str, models, "declared in this file")
			}
		}
	}
	if train := p.Block("train"); train != nil && !p.File.Partial {
		if len(p.Models) == 0 {
			c.errorf(train.KindRange, "no-model", "nothing to train",
				"The file declares no model. Add a model block: model NAME { input [...] ... }.")
		} else if len(p.Models) > 1 && train.Field("model") == nil && !ganMode(train) {
			c.errorf(train.KindRange, "ambiguous-model", "which model to train",
				"The file declares %d models (%s); say which one with: model NAME.", len(models), strings.Join(models, ", "))
		}
		if len(sources) == 0 {
			c.errorf(train.KindRange, "no-source", "nothing to train on",
				"The file declares no source. Add one: source NAME KIND { ... }.")
		} else if len(sources) > 1 && train.Field("source") == nil && !contains(sources, "train") {
			c.errorf(train.KindRange, "ambiguous-source", "which source to train on",
				"The file declares %d sources (%s) and none is named train; say which with: source NAME.",
				len(sources), strings.Join(sources, ", "))
		}
		c.gan(p, train)
	}
	if v := p.Top.Arg("device", "name"); v != nil {
		c.device(p, v)
	} else if f := p.Top.Field("device"); f != nil && f.First() != nil {
		c.device(p, f.First())
	}
}

// device checks the top-level device setting: auto, cpu, cuda:N, a built-in
// profile or a device block of this file.
func (c *checker) device(p *Program, v *Value) {
	name := v.Str
	if v.Auto || name == "auto" || name == "cpu" {
		return
	}
	if strings.HasPrefix(name, "cuda:") {
		if n, err := strconv.Atoi(strings.TrimPrefix(name, "cuda:")); err == nil && n >= 0 {
			return
		}
	}
	if name == "cuda" {
		return
	}
	known := append([]string{"auto", "cpu", "cuda:0"}, c.schema.DeviceNames()...)
	for _, b := range p.BlocksOf("device") {
		known = append(known, b.Name())
	}
	if contains(known, name) {
		return
	}
	c.unknown(v.Range, "unknown-device", "device", name, known, "a built-in profile or a device block of this file")
}
