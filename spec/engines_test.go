package spec

import (
	"slices"
	"testing"
)

// TestRegisterEngine: names come back sorted and once, and a name goes
// when the registration that added it is undone, not before.
func TestRegisterEngine(t *testing.T) {
	before := Engines()
	undoZ := RegisterEngine("zz-test")
	undoA := RegisterEngine("aa-test")
	again := RegisterEngine("aa-test")
	got := Engines()
	if len(got) != len(before)+2 || !slices.IsSorted(got) || !slices.Contains(got, "aa-test") || !slices.Contains(got, "zz-test") {
		t.Fatalf("Engines() = %v after registering aa-test and zz-test over %v", got, before)
	}
	again()
	if !slices.Contains(Engines(), "aa-test") {
		t.Error("undoing a second registration took the name off")
	}
	undoA()
	undoZ()
	if got := Engines(); !slices.Equal(got, before) {
		t.Errorf("Engines() = %v after undoing, want %v", got, before)
	}
}
