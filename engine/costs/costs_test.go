package costs

import (
	"slices"
	"testing"

	"pipe/engine"
	"pipe/spec"
)

// TestEnginesRegistered holds that linking the engines registers them,
// under the names the engine field and a plan accept (spec.Engines),
// and that their traits agree: auto takes an engine only on a device it
// computes on, and one engine a device kind.
func TestEnginesRegistered(t *testing.T) {
	var names []string
	auto := map[string]string{}
	for _, e := range Engines() {
		names = append(names, e.Name())
		tr := e.Traits()
		for _, k := range tr.Auto {
			if !tr.Runs(k) {
				t.Errorf("%s: auto on %s, where it does not compute", e.Name(), k)
			}
			if o, ok := auto[k]; ok {
				t.Errorf("engine auto on %s is both %s and %s", k, o, e.Name())
			}
			auto[k] = e.Name()
		}
	}
	if !slices.Equal(names, []string{"native", "torch"}) {
		t.Errorf("Engines() = %v, want native and torch", names)
	}
	if got := spec.Engines(); !slices.Equal(got, names) {
		t.Errorf("spec.Engines() = %v, described %v", got, names)
	}
}

// TestBackendsRegistered holds that each engine registers how a run
// starts it beside its descriptor, under the same name, and that what it
// starts is that engine.
func TestBackendsRegistered(t *testing.T) {
	var names []string
	for _, r := range engine.Registered() {
		names = append(names, r.Name)
		if b := r.New(engine.Setup{}); b.Name() != r.Name {
			t.Errorf("%s starts an engine named %s", r.Name, b.Name())
		}
	}
	var want []string
	for _, e := range Engines() {
		want = append(want, e.Name())
	}
	if !slices.Equal(names, want) {
		t.Errorf("engines started %v, described %v", names, want)
	}
}
