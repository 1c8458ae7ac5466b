package native

import (
	"testing"

	"pipe/internal/opswitch"
	"pipe/stdlib"
)

// TestKernelsNameOps checks that every registered kernel is a stdlib op's,
// so that a misspelt registration fails here rather than as an op the
// backend says it cannot run.
func TestKernelsNameOps(t *testing.T) {
	if len(opKernels) < 20 {
		t.Fatalf("%d kernels registered: the registrations did not run", len(opKernels))
	}
	for op := range opKernels {
		if stdlib.LookupOp(op) == nil {
			t.Errorf("a kernel is registered for %q, which is no stdlib op", op)
		}
	}
}

// TestNoOpSwitchInBuild keeps build.go free of a switch on op names: an
// op's kernel registers itself in its own file (registerKernel).
func TestNoOpSwitchInBuild(t *testing.T) {
	cs, err := opswitch.Cases("build.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		t.Errorf("build.go:%d: case %q; register the op's kernel beside it instead", c.Line, c.Op)
	}
}
