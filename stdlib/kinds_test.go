package stdlib

import (
	"slices"
	"testing"

	"pipe/lang"
)

// TestKindsNameKnownKinds: an argument limited to some kinds names kinds
// its field's kind argument accepts, so a typo cannot hide an argument
// from every kind.
func TestKindsNameKnownKinds(t *testing.T) {
	r := Schema()
	check := func(owner string, args []*lang.ArgSpec) {
		ka := lang.KindArg(args)
		for _, a := range args {
			if len(a.Kinds) == 0 {
				continue
			}
			if ka == nil {
				t.Errorf("%s %s: limited to kinds, but %s has no kind argument", owner, a.Name, owner)
				continue
			}
			for _, k := range a.Kinds {
				if !slices.Contains(ka.Choices(), k) {
					t.Errorf("%s %s: kind %q is not one of %v", owner, a.Name, k, ka.Choices())
				}
			}
		}
	}
	var fields []*lang.FieldSpec
	fields = append(fields, r.TopFields()...)
	for _, b := range r.Blocks() {
		fields = append(fields, b.Fields...)
		for _, v := range b.Variants {
			fields = append(fields, v...)
		}
	}
	for _, f := range fields {
		check(f.Name, f.Args)
	}
	for _, l := range r.Layers() {
		check(l.Name, l.Args)
	}
}

// TestOptimizerArgsByKind: each optimizer takes its own settings.
func TestOptimizerArgsByKind(t *testing.T) {
	var opt *lang.FieldSpec
	for _, f := range Schema().Block("train").Fields {
		if f.Name == "optimizer" {
			opt = f
		}
	}
	if opt == nil {
		t.Fatal("train has no optimizer field")
	}
	names := func(kind string) []string {
		var out []string
		for _, a := range lang.ArgsOfKind(opt.Args, kind) {
			out = append(out, a.Name)
		}
		return out
	}
	if got, want := names("sgd"), []string{"kind", "lr", "momentum", "nesterov", "weight_decay"}; !slices.Equal(got, want) {
		t.Errorf("sgd takes %v, want %v", got, want)
	}
	for _, k := range []string{"adam", "adamw"} {
		if got, want := names(k), []string{"kind", "lr", "weight_decay", "beta1", "beta2", "eps"}; !slices.Equal(got, want) {
			t.Errorf("%s takes %v, want %v", k, got, want)
		}
	}
}
