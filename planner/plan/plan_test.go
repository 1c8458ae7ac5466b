package plan

import (
	"errors"
	"strings"
	"testing"

	"pipe/spec"
)

// TestValidateEngineNames: a plan's engine must be one this program
// registered (spec.Engines), whatever its name; the list is read when
// the plan is, so a third engine registered later is accepted.
func TestValidateEngineNames(t *testing.T) {
	p := &Plan{
		BatchSize: 2, AccumulationSteps: 1, EffectiveBatch: 2, Backend: BackendCPU,
		Layers:    []Layer{{Name: "fc", Op: "dense"}},
		Optimizer: Optimizer{LR: 1e-3}, Precision: Precision{Compute: "fp32"},
		Engine: Engine{Name: "third"},
	}
	if err := p.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `engine "third"`) {
		t.Fatalf("an unregistered engine: %v", err)
	}
	undo := spec.RegisterEngine("third")
	if err := p.Validate(); err != nil {
		t.Errorf("a registered third engine: %v", err)
	}
	undo()
	if err := p.Validate(); err == nil {
		t.Error("the third engine is still accepted once unregistered")
	}
	p.Engine.Name = ""
	if err := p.Validate(); err != nil || p.EngineName() != EngineNative {
		t.Errorf("a plan naming no engine: %v, engine %q", err, p.EngineName())
	}
}
