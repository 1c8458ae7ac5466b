package onnx

import (
	"testing"

	"pipe/internal/opswitch"
	"pipe/stdlib"
)

// TestLoweringsNameOps checks that every registered lowering is a stdlib
// op's, so that a misspelt registration fails here.
func TestLoweringsNameOps(t *testing.T) {
	if len(lowerings) < 20 {
		t.Fatalf("%d lowerings registered: the registrations did not run", len(lowerings))
	}
	for op := range lowerings {
		if stdlib.LookupOp(op) == nil {
			t.Errorf("a lowering is registered for %q, which is no stdlib op", op)
		}
	}
}

// TestNoOpSwitchInLower keeps lower.go free of a switch on op names: an
// op's lowering registers itself in its own file (registerLowering).
func TestNoOpSwitchInLower(t *testing.T) {
	cs, err := opswitch.Cases("lower.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		t.Errorf("lower.go:%d: case %q; register the op's lowering beside it instead", c.Line, c.Op)
	}
}

// TestUnreadInitializersAreLeftOut: an initializer no node reads (a
// conv's raw weights once a batchnorm is folded into new ones, which
// onnxruntime warned about) is not written.
func TestUnreadInitializersAreLeftOut(t *testing.T) {
	e := &exporter{used: map[string]bool{}}
	e.floats("conv1.weight", []int64{1}, []float32{1})
	e.floats("conv1.weight.folded", []int64{1}, []float32{2})
	e.ints("shape", nil, 4)
	e.node("conv1", "Conv", []string{"x", "conv1.weight.folded"}, []string{"y"})
	e.node("reshape", "Reshape", []string{"y", "shape"}, []string{"z"})
	if got := len(e.readInits()); got != 2 || len(e.inits) != 3 {
		t.Errorf("%d of %d initializers written, want the 2 read", got, len(e.inits))
	}
}
