package editor

import (
	"sort"
	"strings"

	"pipe/lang"
)

// Words are the names the registry knows, sorted into the classes the
// editors colour differently. Blocks stand apart (a block keyword is one
// only where it opens a block; "source" and "device" are fields too).
// Among the others a name belongs to the first class that has it, in the
// order Layers, Families, Values, Fields, Args, so the lists never
// overlap: "relu" is a layer though mlp's activation takes it, and "bf16"
// a value though a device block has a field of that name.
type Words struct {
	// Blocks are the block keywords: source, model, train, ...
	Blocks []string
	// Layers are layer names and aliases; Families the model families.
	Layers, Families []string
	// Fields are the settings of the file and of every block.
	Fields []string
	// Args are the argument names of fields and layers (lr, kernel, k).
	Args []string
	// Glued are the argument names that take an integer joined to them
	// (k3, pad1, s2).
	Glued []string
	// Values are enumeration values and device profiles.
	Values []string
	// Kinds are the values of block labels (source NAME idx {); they are
	// coloured in the block's header only, since "images" is also a field.
	Kinds []string
}

// Collect gathers the words of a schema.
func Collect(s lang.Schema) *Words {
	w := &Words{}
	seen := map[string]bool{}
	add := func(list *[]string, names ...string) {
		for _, n := range names {
			if n != "" && !seen[n] && n != "auto" && n != "true" && n != "false" {
				seen[n] = true
				*list = append(*list, n)
			}
		}
	}
	var fields []*lang.FieldSpec
	fields = append(fields, s.TopFields()...)
	for _, name := range s.BlockNames() {
		b := s.Block(name)
		w.Blocks = append(w.Blocks, b.Name)
		fields = append(fields, b.Fields...)
		variants := make([]string, 0, len(b.Variants))
		for v := range b.Variants {
			variants = append(variants, v)
		}
		sort.Strings(variants)
		for _, v := range variants {
			fields = append(fields, b.Variants[v]...)
		}
	}
	var layers []*lang.LayerSpec
	for _, name := range s.LayerNames() {
		l := s.Layer(name)
		if l == nil {
			continue
		}
		layers = append(layers, l)
		if l.Family {
			continue
		}
		add(&w.Layers, name)
	}
	for _, name := range s.LayerNames() {
		if l := s.Layer(name); l != nil && l.Family {
			add(&w.Families, name)
		}
	}
	var args []*lang.ArgSpec
	for _, f := range fields {
		args = append(args, f.Args...)
	}
	for _, l := range layers {
		args = append(args, l.Args...)
	}
	for _, name := range s.BlockNames() {
		for _, l := range s.Block(name).Labels {
			w.Kinds = append(w.Kinds, l.Enum...)
		}
	}
	for _, a := range args {
		add(&w.Values, a.Choices()...)
	}
	add(&w.Values, s.DeviceNames()...)
	for _, f := range fields {
		add(&w.Fields, f.Name)
	}
	glued := map[string]bool{}
	for _, a := range args {
		// A field's main argument is named after the field and never
		// written; only names that can appear in the source are listed.
		if !a.Positional {
			add(&w.Args, a.Name)
		}
		if !a.Positional || a.Glued {
			add(&w.Args, a.Aliases...)
		}
		if a.Glued {
			glued[a.Name] = true
			for _, al := range a.Aliases {
				glued[al] = true
			}
		}
	}
	for g := range glued {
		w.Glued = append(w.Glued, g)
	}
	for _, l := range []*[]string{&w.Blocks, &w.Layers, &w.Families, &w.Fields, &w.Args, &w.Glued, &w.Values, &w.Kinds} {
		sort.Strings(*l)
	}
	return w
}

// alternation is a regular-expression alternation of names, longest first
// so that no name is cut short by a prefix of it; quote escapes each name.
func alternation(names []string, quote func(string) string) string {
	sorted := append([]string(nil), names...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if len(sorted[i]) != len(sorted[j]) {
			return len(sorted[i]) > len(sorted[j])
		}
		return sorted[i] < sorted[j]
	})
	quoted := make([]string, len(sorted))
	for i, n := range sorted {
		quoted[i] = quote(n)
	}
	return strings.Join(quoted, "|")
}

// onigQuote escapes the characters names may hold ('-', ':') that could
// be special in an Oniguruma pattern.
func onigQuote(s string) string {
	return strings.NewReplacer("-", `\-`, ":", `\:`).Replace(s)
}

// vimQuote escapes for a vim pattern in very-magic mode, where only '-'
// and ':' among the characters names hold need no escape.
func vimQuote(s string) string { return s }
