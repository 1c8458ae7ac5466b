package cost

import (
	"testing"

	"pipe/stdlib"
)

type named string

func (n named) Name() string                     { return string(n) }
func (named) Traits() Traits                     { return Traits{Devices: []string{"cpu"}} }
func (named) Memory(*stdlib.Graph, Setup) Memory { return Memory{} }

// TestRegister holds the registry: engines come back by name whatever
// their order of registration, and a name registered twice panics.
func TestRegister(t *testing.T) {
	registry.Lock()
	saved := registry.byName
	registry.byName = map[string]Engine{}
	registry.Unlock()
	defer func() { registry.Lock(); registry.byName = saved; registry.Unlock() }()

	Register(named("zeta"))
	Register(named("alpha"))
	got := Registered()
	if len(got) != 2 || got[0].Name() != "alpha" || got[1].Name() != "zeta" {
		t.Fatalf("Registered() = %v, want alpha then zeta", got)
	}
	if !got[0].Traits().Runs("cpu") || got[0].Traits().Runs("gpu") {
		t.Errorf("Runs: %+v", got[0].Traits())
	}
	defer func() {
		if recover() == nil {
			t.Error("a second alpha registered without a panic")
		}
	}()
	Register(named("alpha"))
}
