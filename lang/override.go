package lang

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"pipe/diag"
)

// CommandLine is the file name a diagnostic about an override carries:
// its range points into OverrideText's line of --set flags.
const CommandLine = "command line"

// A Set is one override from the command line (--set PATH=VALUE): a path
// to a field, an argument or a layer's argument of the file, and the
// value in the language's own syntax. Paths: train.lr, train.optimizer.lr,
// source.train.split, model.fashion.dense[0].units, model.fashion.input,
// seed.
type Set struct {
	Path, Value string
	// At is the flag's place in OverrideText, and ValueAt its value's,
	// for diagnostics.
	At, ValueAt diag.Range
	// path is Path's segments.
	path []segment
}

type segment struct {
	name  string
	index int // -1 when the segment has no [i]
	start int // byte offset of the segment in the command line
}

// String is the override as it was given.
func (s Set) String() string { return s.Path + "=" + s.Value }

// OverrideText is the command line the sets' ranges point into.
func OverrideText(sets []Set) string {
	var b strings.Builder
	for i, s := range sets {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("--set " + s.String())
	}
	return b.String()
}

var segRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)(?:\[([0-9]+)\])?$`)

// ParseSets reads --set flags (PATH=VALUE each) in order.
func ParseSets(flags []string) ([]Set, diag.Diagnostics) {
	var sets []Set
	var ds diag.Diagnostics
	off := 0
	for _, f := range flags {
		start := off + len("--set ")
		off = start + len(f) + 1
		at := lineRange(start, start+len(f))
		path, value, ok := strings.Cut(f, "=")
		path, value = strings.TrimSpace(path), strings.TrimSpace(value)
		if !ok || path == "" || value == "" {
			ds = append(ds, overrideErr(at, "an override is PATH=VALUE", fmt.Sprintf("--set %s: write it as train.lr=3e-4 or model.NAME.dense[0].units=256", f)))
			sets = append(sets, Set{Path: path, Value: value, At: at})
			continue
		}
		if strings.ContainsAny(value, "\n\r") {
			ds = append(ds, overrideErr(at, "an override's value is one line", ""))
		}
		s := Set{Path: path, Value: value, At: at, ValueAt: at}
		if eq := strings.IndexByte(f, '='); eq >= 0 {
			s.ValueAt = lineRange(start+eq+1, start+len(f))
		}
		pos := start
		for _, part := range strings.Split(path, ".") {
			m := segRE.FindStringSubmatch(part)
			if m == nil {
				ds = append(ds, overrideErr(lineRange(pos, pos+len(part)), fmt.Sprintf("%q is not a path segment", part),
					"a segment is a name, or a name and an index such as dense[0]"))
				break
			}
			seg := segment{name: m[1], index: -1, start: pos}
			if m[2] != "" {
				seg.index, _ = strconv.Atoi(m[2])
			}
			s.path = append(s.path, seg)
			pos += len(part) + 1
		}
		sets = append(sets, s)
	}
	return sets, ds
}

func lineRange(a, b int) diag.Range {
	return diag.Range{File: CommandLine, Start: diag.Pos{Line: 1, Column: a + 1, Byte: a}, End: diag.Pos{Line: 1, Column: b + 1, Byte: b}}
}

func overrideErr(at diag.Range, summary, detail string) *diag.Diagnostic {
	r := at
	return &diag.Diagnostic{Severity: diag.Error, Code: "override", Summary: summary, Detail: detail, Subject: &r}
}

// Override applies sets to src in order: each replaces the value it
// names, or adds the argument or field when the file does not write it,
// and the result is checked again. A path that names nothing, and a
// value the checker refuses, are diagnostics on the flag; the source is
// returned as far as it was changed.
func Override(name string, src []byte, sets []Set, schema Schema) ([]byte, diag.Diagnostics) {
	var all diag.Diagnostics
	for _, s := range sets {
		if len(s.path) == 0 {
			continue // ParseSets said why
		}
		f, ds := Parse(name, src)
		p, cds := Check(f, schema)
		if ds = append(ds, cds...); ds.HasErrors() || p == nil {
			return src, append(all, ds...)
		}
		e, d := locate(p, src, s, schema)
		if d != nil {
			all = append(all, d)
			continue
		}
		next := append(append(append([]byte(nil), src[:e.from]...), e.text...), src[e.to:]...)
		f2, ds2 := Parse(name, next)
		_, cds2 := Check(f2, schema)
		ds2 = append(ds2, cds2...)
		end := e.from + len(e.text)
		bad := false
		for _, d := range ds2 {
			if d.Severity != diag.Error {
				continue
			}
			bad = true
			if d.Subject != nil && d.Subject.Start.Byte < end && d.Subject.End.Byte > e.from {
				all = append(all, overrideErr(s.ValueAt, "--set "+s.String()+": "+d.Summary, d.Detail))
				continue
			}
			d2 := *d
			d2.Summary = d.Summary + " (after --set " + s.String() + ")"
			all = append(all, &d2)
		}
		if bad {
			continue
		}
		src = next
	}
	return src, all
}

// edit replaces src[from:to] with text.
type edit struct {
	from, to int
	text     string
}

func (s Set) errAt(i int, summary, detail string) *diag.Diagnostic {
	seg := s.path[i]
	n := len(seg.name)
	if seg.index >= 0 {
		n += len(strconv.Itoa(seg.index)) + 2
	}
	return overrideErr(lineRange(seg.start, seg.start+n), summary, detail)
}

func suggest(name string, names []string) string {
	if near := nearest(name, names); near != "" {
		return fmt.Sprintf("did you mean %s? ", near)
	}
	return ""
}

// locate resolves s's path in p to the edit that gives it s.Value.
func locate(p *Program, src []byte, s Set, schema Schema) (edit, *diag.Diagnostic) {
	segs := s.path
	head := segs[0]
	for _, fs := range schema.TopFields() {
		if fs.Name == head.name {
			return fieldEdit(p, src, s, p.Top, fs, 1, schema)
		}
	}
	bs := schema.Block(head.name)
	if bs == nil {
		names := schema.BlockNames()
		for _, fs := range schema.TopFields() {
			names = append(names, fs.Name)
		}
		return edit{}, s.errAt(0, fmt.Sprintf("no block or field %q", head.name), suggest(head.name, names)+"a path starts with a block (train, model, source, ...) or a top-level field (seed, precision, ...)")
	}
	blocks := p.BlocksOf(head.name)
	if len(blocks) == 0 {
		return edit{}, s.errAt(0, fmt.Sprintf("the file has no %s block", head.name), "an override changes what the file writes; add the block to the file")
	}
	var b *Block
	i := 1
	if len(segs) > 1 {
		for _, c := range blocks {
			if c.Name() != "" && c.Name() == segs[1].name {
				b, i = c, 2
			}
		}
	}
	if b == nil {
		if len(blocks) > 1 {
			var names []string
			for _, c := range blocks {
				names = append(names, head.name+"."+c.Name())
			}
			at := 0
			if len(segs) > 1 {
				at = 1
			}
			return edit{}, s.errAt(at, fmt.Sprintf("the file has %d %s blocks", len(blocks), head.name), "name one: "+strings.Join(names, ", "))
		}
		b = blocks[0]
	}
	if i >= len(segs) {
		return edit{}, s.errAt(i-1, "the path names a block, not a value", "add a field: "+s.Path+".FIELD")
	}
	if i == 1 && b.Name() != "" && fieldSpec(b, segs[1].name) == nil && !callNamed(b.Model, segs[1].name) {
		// model.fashon.dense: a misspelt block name, not a layer.
		var names []string
		for _, c := range blocks {
			names = append(names, c.Name())
		}
		if near := nearest(segs[1].name, names); near != "" {
			return edit{}, s.errAt(1, fmt.Sprintf("no %s named %q", head.name, segs[1].name), fmt.Sprintf("did you mean %s?", near))
		}
	}
	if b.Model != nil {
		if fs := fieldSpec(b, segs[i].name); fs == nil {
			return layerEdit(b.Model, src, s, i, schema)
		}
	}
	return fieldEdit(p, src, s, b, nil, i, schema)
}

// callNamed says model m (nil for other blocks) calls a layer name.
func callNamed(m *Model, name string) bool {
	if m == nil {
		return false
	}
	for _, c := range m.Calls() {
		if c.Name == name {
			return true
		}
	}
	return false
}

// fieldSpec finds a field spec of block b by name.
func fieldSpec(b *Block, name string) *FieldSpec {
	variant := ""
	if b.Spec.VariantLabel < len(b.Labels) {
		variant = b.Labels[b.Spec.VariantLabel].Value
	}
	for _, fs := range b.Spec.FieldsFor(variant) {
		if fs.Name == name {
			return fs
		}
	}
	return nil
}

// fieldEdit resolves segs[i:] within block b (the top-level fields when
// top is set, segs[i-1] naming the field).
func fieldEdit(p *Program, src []byte, s Set, b *Block, top *FieldSpec, i int, schema Schema) (edit, *diag.Diagnostic) {
	segs := s.path
	var fs *FieldSpec
	var argSeg = -1
	if top != nil {
		fs = top
		if i < len(segs) {
			argSeg = i
		}
	} else {
		fs = fieldSpec(b, segs[i].name)
		if fs == nil {
			// train.lr: an argument of one of the block's fields.
			var owners []*FieldSpec
			variant := ""
			if b.Spec.VariantLabel < len(b.Labels) {
				variant = b.Labels[b.Spec.VariantLabel].Value
			}
			var names, cands []string
			for _, c := range b.Spec.FieldsFor(variant) {
				names = append(names, c.Name)
				cands = append(cands, c.Name)
				if b.Field(c.Name) != nil && len(c.Args) > 1 {
					for _, a := range c.Args[1:] {
						cands = append(cands, a.Name)
					}
				}
				if c.Arg(segs[i].name) != nil && (len(c.Args) == 0 || c.Args[0].Name != segs[i].name) {
					owners = append(owners, c)
				}
			}
			if len(owners) > 1 {
				// optimizer's and d_optimizer's lr: the one the file writes.
				var written []*FieldSpec
				for _, c := range owners {
					if b.Field(c.Name) != nil {
						written = append(written, c)
					}
				}
				owners = written
			}
			if len(owners) != 1 {
				return edit{}, s.errAt(i, fmt.Sprintf("%s has no field %q", b.Kind, segs[i].name), suggest(segs[i].name, cands)+"fields: "+strings.Join(names, ", "))
			}
			fs, argSeg = owners[0], i
			i--
		} else if i+1 < len(segs) {
			argSeg = i + 1
		}
	}
	if argSeg >= 0 && argSeg+1 < len(segs) {
		return edit{}, s.errAt(argSeg+1, "the path goes on past an argument", "")
	}
	var f *Field
	if b != nil {
		f = b.Field(fs.Name)
	}
	var as *ArgSpec
	if argSeg >= 0 {
		as = fs.Arg(segs[argSeg].name)
		if as == nil {
			var names []string
			for _, a := range fs.Args {
				names = append(names, a.Name)
			}
			return edit{}, s.errAt(argSeg, fmt.Sprintf("%s has no argument %q", fs.Name, segs[argSeg].name), suggest(segs[argSeg].name, names)+"arguments: "+strings.Join(names, ", "))
		}
	} else if len(fs.Args) > 0 {
		as = fs.Args[0]
	} else {
		return edit{}, s.errAt(i, fmt.Sprintf("%s takes no value", fs.Name), "")
	}
	if (i < len(segs) && segs[i].index >= 0) || (argSeg >= 0 && segs[argSeg].index >= 0) {
		return edit{}, s.errAt(i, "an index is for a model's layers", "")
	}
	if f != nil {
		if v := f.Args[as.Name]; v != nil {
			return replaceValue(src, v, as, s.Value), nil
		}
		return edit{from: f.Range.End.Byte, to: f.Range.End.Byte, text: " " + argText(as, fs.Args, s.Value)}, nil
	}
	text := fs.Name + " " + argText(as, fs.Args, s.Value)
	if b == nil || top != nil {
		// A top-level field the file does not write: a line of its own.
		at := 0
		if p.Top != nil && len(p.Top.Fields) > 0 {
			at = p.Top.Fields[len(p.Top.Fields)-1].Range.End.Byte
			return edit{from: at, to: at, text: "\n" + text}, nil
		}
		return edit{from: at, to: at, text: text + "\n"}, nil
	}
	// Before the block's closing brace.
	end := b.Range.End.Byte
	brace := strings.LastIndexByte(string(src[b.Range.Start.Byte:end]), '}')
	if brace < 0 {
		return edit{}, s.errAt(i, "cannot find where "+b.Kind+" ends", "")
	}
	at := b.Range.Start.Byte + brace
	return edit{from: at, to: at, text: " " + text + " "}, nil
}

// layerEdit resolves segs[i:], a layer and one of its arguments, in m.
func layerEdit(m *Model, src []byte, s Set, i int, schema Schema) (edit, *diag.Diagnostic) {
	segs := s.path
	sel := segs[i]
	var calls []*LayerCall
	var names []string
	for _, c := range m.Calls() {
		if !slices.Contains(names, c.Name) {
			names = append(names, c.Name)
		}
		if c.Name == sel.name {
			calls = append(calls, c)
		}
	}
	if len(calls) == 0 {
		return edit{}, s.errAt(i, fmt.Sprintf("model %s has no field or layer %q", m.Name, sel.name), suggest(sel.name, append([]string{"input"}, names...))+"layers: "+strings.Join(names, ", "))
	}
	var c *LayerCall
	switch {
	case sel.index >= len(calls):
		return edit{}, s.errAt(i, fmt.Sprintf("model %s has %d %s layers: %s[0] to %s[%d]", m.Name, len(calls), sel.name, sel.name, sel.name, len(calls)-1), "")
	case sel.index >= 0:
		c = calls[sel.index]
	case len(calls) > 1:
		return edit{}, s.errAt(i, fmt.Sprintf("model %s has %d %s layers", m.Name, len(calls), sel.name), fmt.Sprintf("say which, counting from 0 in the file's order: %s[0] to %s[%d]", sel.name, sel.name, len(calls)-1))
	default:
		c = calls[0]
	}
	if c.Spec == nil {
		return edit{}, s.errAt(i, "unknown layer "+c.Name, "")
	}
	var argNames []string
	for _, a := range c.Spec.Args {
		argNames = append(argNames, a.Name)
	}
	if i+1 >= len(segs) {
		return edit{}, s.errAt(i, "the path names a layer, not a value", "add its argument: "+s.Path+".ARG, one of "+strings.Join(argNames, ", "))
	}
	if i+2 < len(segs) {
		return edit{}, s.errAt(i+2, "the path goes on past an argument", "")
	}
	as := c.Spec.Arg(segs[i+1].name)
	if as == nil && len(argNames) == 0 {
		return edit{}, s.errAt(i+1, fmt.Sprintf("%s takes no arguments", c.Name), "")
	}
	if as == nil {
		return edit{}, s.errAt(i+1, fmt.Sprintf("%s has no argument %q", c.Name, segs[i+1].name), suggest(segs[i+1].name, argNames)+"arguments: "+strings.Join(argNames, ", "))
	}
	if v := c.Args[as.Name]; v != nil {
		return replaceValue(src, v, as, s.Value), nil
	}
	if as.Positional {
		at := c.NameRange.End.Byte
		return edit{from: at, to: at, text: " " + s.Value}, nil
	}
	return edit{from: c.Range.End.Byte, to: c.Range.End.Byte, text: " " + argText(as, c.Spec.Args, s.Value)}, nil
}

var intRE = regexp.MustCompile(`^[0-9]+$`)

// replaceValue is the edit that writes value in place of v, keeping a
// glued argument's name (k3 becomes k5).
func replaceValue(src []byte, v *Value, as *ArgSpec, value string) edit {
	from, to := v.Range.Start.Byte, v.Range.End.Byte
	written := string(src[from:to])
	if as.Glued && written != "" && (written[0] < '0' || written[0] > '9') && written[0] != '-' {
		// The longest of the argument's names the written word starts
		// with, digits after it.
		best := ""
		for _, n := range append([]string{as.Name}, as.Aliases...) {
			if strings.HasPrefix(written, n) && len(n) > len(best) && intRE.MatchString(written[len(n):]) {
				best = n
			}
		}
		if best != "" {
			if intRE.MatchString(value) {
				return edit{from: from, to: to, text: best + value}
			}
			return edit{from: from, to: to, text: best + " " + value}
		}
	}
	return edit{from: from, to: to, text: value}
}

// argText writes a named argument the file does not have, as a glued
// integer where the argument takes one (k5), else NAME VALUE; the first
// positional argument of args is written bare.
func argText(as *ArgSpec, args []*ArgSpec, value string) string {
	if len(args) > 0 && args[0] == as && as.Positional {
		return value
	}
	if as.Glued && intRE.MatchString(value) {
		// The shortest name, as files write them: k5, pad1.
		n := as.Name
		for _, a := range as.Aliases {
			if len(a) < len(n) {
				n = a
			}
		}
		return n + value
	}
	return as.Name + " " + value
}
