package lsp

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"pipe/lang"
	"pipe/lang/syntax"
	"pipe/stdlib"
)

// Hover on the words after a field's or a layer's name: an argument's
// name says what the argument is; a glued argument (k3) which argument it
// sets to what; a value what it is a value of and, where a number alone
// does not say it, what it amounts to (24GiB in bytes, 224x224 in pixels);
// the kind of a source the settings that kind takes; the kind of an
// optimizer the arguments it takes. Everything comes from the registry
// and from the checked values.

// argOwner is a field or a layer call with its checked arguments.
type argOwner struct {
	name  string // "optimizer", "conv"
	doc   string // the field's or the layer's doc
	specs []*lang.ArgSpec
	args  lang.Args
}

// describeArgs describes the word of an argument list at off, or returns
// "" when off is on none of it.
func describeArgs(o argOwner, text string, tok syntax.Token, off int) string {
	if tok.Kind == syntax.KindIdent {
		if name := gluedName(tok.Text); name != "" {
			if a := lang.FindArg(o.specs, name); a != nil && a.Glued {
				n := tok.Text[len(name):]
				return fmt.Sprintf("**%s** — %s %s: argument of %s, glued to its name\n\n%s", tok.Text, a.Name, n, o.name, argDoc(a))
			}
		}
	}
	a, v := valueAt(o, off)
	if tok.Kind == syntax.KindIdent && (v == nil || v.Type == lang.TBool) {
		if spec := lang.FindArg(o.specs, tok.Text); spec != nil {
			return fmt.Sprintf("**%s** — argument of %s\n\n%s", tok.Text, o.name, argDoc(spec))
		}
	}
	if v == nil {
		return ""
	}
	return valueDoc(o, a, v, text)
}

// valueAt finds the innermost value of the owner's arguments at off: an
// element of a list rather than the list.
func valueAt(o argOwner, off int) (*lang.ArgSpec, *lang.Value) {
	var bestA *lang.ArgSpec
	var best *lang.Value
	size := func(v *lang.Value) int { return v.Range.End.Byte - v.Range.Start.Byte }
	consider := func(a *lang.ArgSpec, v *lang.Value) {
		if v != nil && in(v.Range, off) && (best == nil || size(v) < size(best)) {
			bestA, best = a, v
		}
	}
	for name, v := range o.args {
		a := lang.FindArg(o.specs, name)
		if a == nil {
			continue
		}
		consider(a, v)
		for _, e := range v.List {
			consider(a, e)
		}
	}
	return bestA, best
}

// argLabel names an argument for a hover: "kind of optimizer", or "loss"
// for the field's own value.
func argLabel(a *lang.ArgSpec, owner string) string {
	if a.Name == owner {
		return owner
	}
	return a.Name + " of " + owner
}

// valueDoc describes a checked value of argument a of o: what it is a
// value of, what it amounts to, and the argument's documentation.
func valueDoc(o argOwner, a *lang.ArgSpec, v *lang.Value, text string) string {
	src := ""
	if v.Range.Start.Byte >= 0 && v.Range.End.Byte <= len(text) && v.Range.Start.Byte <= v.Range.End.Byte {
		src = text[v.Range.Start.Byte:v.Range.End.Byte]
	}
	var b strings.Builder
	label := argLabel(a, o.name)
	switch {
	case v.Auto:
		fmt.Fprintf(&b, "**%s** — %s: the planner decides", src, label)
		switch {
		case v.AutoMin != nil && v.AutoMax != nil:
			fmt.Fprintf(&b, ", between %s and %s", num(*v.AutoMin), num(*v.AutoMax))
		case v.AutoMin != nil:
			fmt.Fprintf(&b, ", at least %s", num(*v.AutoMin))
		case v.AutoMax != nil:
			fmt.Fprintf(&b, ", at most %s", num(*v.AutoMax))
		}
	case v.Type == lang.TEnum:
		fmt.Fprintf(&b, "**%s** — %s, one of %s", v.Str, label, strings.Join(a.Choices(), ", "))
		if ka := lang.KindArg(o.specs); ka == a {
			var takes []string
			for _, s := range lang.ArgsOfKind(o.specs, v.Str) {
				if s != ka {
					takes = append(takes, "`"+s.Name+"`")
				}
			}
			if len(takes) > 0 {
				fmt.Fprintf(&b, "\n\n%s %s takes %s.", o.name, v.Str, strings.Join(takes, ", "))
			}
		}
	case v.Type == lang.TBytes:
		fmt.Fprintf(&b, "**%s** — %s: %s bytes (%s)", src, label, thousands(v.Int), bytesIEC(v.Int))
	case v.Type == lang.TBandwidth:
		fmt.Fprintf(&b, "**%s** — %s: %s bytes per second (%s/s)", src, label, thousands(int64(v.Float)), bytesIEC(int64(v.Float)))
	case v.Type == lang.TFlops:
		fmt.Fprintf(&b, "**%s** — %s: %s FLOP per second", src, label, thousands(int64(v.Float)))
	case v.Type == lang.TSize:
		fmt.Fprintf(&b, "**%s** — %s: %s", src, label, pixels(v.Dims))
	case v.Type == lang.TShape:
		fmt.Fprintf(&b, "**%s** — %s: %s values a sample", src, label, thousands(product(v.Dims)))
	case v.Type == lang.TName && a.Name == "name" && o.name == "device":
		fmt.Fprintf(&b, "**%s** — %s", v.Str, label)
		if d := deviceDoc(v.Str); d != "" {
			b.WriteString(": " + d)
		} else {
			b.WriteString(": a device block of this file")
		}
	default:
		fmt.Fprintf(&b, "**%s** — %s", src, label)
	}
	b.WriteString("\n\n" + argDoc(a))
	if a.Name == o.name || lang.KindArg(o.specs) == a {
		if o.doc != "" {
			b.WriteString("\n\n" + o.doc)
		}
	}
	return b.String()
}

// pixels writes a size as its extents and their product: "224 × 224 =
// 50,176 pixels".
func pixels(dims []int64) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return strings.Join(parts, " × ") + " = " + thousands(product(dims)) + " pixels"
}

func product(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		n = satMul(n, d)
	}
	return n
}

// num writes a number as briefly as it reads back.
func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// deviceDoc describes a device the device field may name.
func deviceDoc(name string) string {
	switch {
	case name == "auto":
		return "the first GPU nvidia-smi lists, else the CPU."
	case name == "cpu":
		return "this machine's processor; the planner measures its memory and cores."
	case name == "cuda" || strings.HasPrefix(name, "cuda:"):
		return "a GPU of this machine by its number (cuda:0 is the first); the planner reads its memory from nvidia-smi."
	}
	d := stdlib.Device(name)
	if d == nil {
		return ""
	}
	var rates []string
	for _, p := range []string{"fp32", "tf32", "fp16", "bf16"} {
		if f := d.Peak(p); f > 0 {
			rates = append(rates, fmt.Sprintf("%s %s TFLOP/s", p, num(f/1e12)))
		}
	}
	return fmt.Sprintf("built-in profile, %s: %s of memory, %s GB/s; %s.", d.Doc, bytesIEC(d.Memory), num(d.Bandwidth/1e9), strings.Join(rates, ", "))
}

// labelDoc describes a label of a block header: a name (source scene) or
// a kind (geotiff) with the settings that kind takes.
func labelDoc(b *lang.Block, l lang.Label) string {
	var ls *lang.LabelSpec
	for _, s := range b.Spec.Labels {
		if s.Name == l.Name {
			ls = s
		}
	}
	if ls == nil {
		return ""
	}
	if len(ls.Enum) == 0 {
		var sb strings.Builder
		fmt.Fprintf(&sb, "**%s %s**", b.Kind, l.Value)
		for _, o := range b.Labels {
			if o.Name != l.Name {
				fmt.Fprintf(&sb, " (%s)", o.Value)
			}
		}
		fmt.Fprintf(&sb, " — %s\n\n%s", ls.Doc, b.Spec.Doc)
		return sb.String()
	}
	return kindDoc(b.Spec, ls, l.Value)
}

// kindDoc describes one value of a block's kind label: what it is one of,
// and the settings a block of that kind takes.
func kindDoc(spec *lang.BlockSpec, ls *lang.LabelSpec, value string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "**%s** — a kind of %s, one of %s\n\n%s", value, spec.Name, strings.Join(ls.Enum, ", "), spec.Doc)
	if fields := spec.Variants[value]; len(fields) > 0 {
		fmt.Fprintf(&sb, "\n\nSettings of a %s %s:\n", value, spec.Name)
		for _, f := range spec.FieldsFor(value) {
			req := ""
			if f.Required {
				req = " (required)"
			}
			fmt.Fprintf(&sb, "\n- `%s`%s: %s", f.Name, req, f.Doc)
		}
	}
	return sb.String()
}

// valueWordDoc documents a word the registry knows as a value, without
// the context of a checked file: a block kind, a device profile, or a
// value some arguments accept.
func valueWordDoc(schema lang.Schema, word string) string {
	for _, name := range schema.BlockNames() {
		b := schema.Block(name)
		for _, ls := range b.Labels {
			for _, e := range ls.Enum {
				if e == word {
					return kindDoc(b, ls, word)
				}
			}
		}
	}
	if d := deviceDoc(word); d != "" && word != "auto" {
		return fmt.Sprintf("**%s** — a device: %s", word, d)
	}
	owners := map[string]bool{}
	note := func(a *lang.ArgSpec, owner string) {
		for _, e := range a.Choices() {
			if e == word {
				owners[argLabel(a, owner)] = true
			}
		}
	}
	for _, f := range allFields(schema) {
		for _, a := range f.Args {
			note(a, f.Name)
		}
	}
	for _, name := range schema.LayerNames() {
		if l := schema.Layer(name); l != nil && l.Name == name {
			for _, a := range l.Args {
				note(a, l.Name)
			}
		}
	}
	if len(owners) == 0 {
		return ""
	}
	list := make([]string, 0, len(owners))
	for o := range owners {
		list = append(list, o)
	}
	sort.Strings(list)
	return fmt.Sprintf("**%s** — a value of %s", word, strings.Join(list, "; "))
}

// allFields lists every field of the file and of every block.
func allFields(schema lang.Schema) []*lang.FieldSpec {
	out := append([]*lang.FieldSpec(nil), schema.TopFields()...)
	for _, name := range schema.BlockNames() {
		b := schema.Block(name)
		out = append(out, b.Fields...)
		kinds := make([]string, 0, len(b.Variants))
		for k := range b.Variants {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			out = append(out, b.Variants[k]...)
		}
	}
	return out
}

// sizeWordDoc documents a size token from its text alone: "224x224".
func sizeWordDoc(word string) string {
	var dims []int64
	for _, p := range strings.Split(word, "x") {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n <= 0 {
			return ""
		}
		dims = append(dims, n)
	}
	return fmt.Sprintf("**%s** — a size: %s", word, pixels(dims))
}
