package costs

import (
	"slices"
	"testing"
)

// TestEnginesRegistered holds that linking the engines registers them,
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
}
