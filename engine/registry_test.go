package engine

import "testing"

// TestRegisterTwicePanics holds the registry: a name comes back by Lookup
// once registered, and a second registration of it panics at start-up.
func TestRegisterTwicePanics(t *testing.T) {
	Register(Registration{Name: "registry-test"})
	if _, ok := Lookup("registry-test"); !ok {
		t.Fatal("registry-test not found")
	}
	defer func() {
		if recover() == nil {
			t.Error("a second registry-test did not panic")
		}
	}()
	Register(Registration{Name: "registry-test"})
}
