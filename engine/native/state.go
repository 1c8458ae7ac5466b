package native

import (
	"fmt"
	"slices"
	"strings"

	"pipe/engine"
	"pipe/stdlib"
)

// stateTensors lists every tensor of the state, in order, with the slice
// that holds it: parameters, buffers, then the optimizer's buffers.
func (m *model) stateTensors() []engine.Tensor {
	var out []engine.Tensor
	for _, p := range m.params {
		out = append(out, engine.Tensor{Name: p.name, Shape: p.shape, Data: p.data})
	}
	for _, p := range m.buffers {
		out = append(out, engine.Tensor{Name: p.name, Shape: p.shape, Data: p.data})
	}
	names := m.optNames()
	for _, p := range m.params {
		if len(names) > 0 {
			out = append(out, engine.Tensor{Name: engine.OptimizerKey(p.name, names[0]), Shape: p.shape, Data: p.m1})
		}
		if len(names) > 1 {
			out = append(out, engine.Tensor{Name: engine.OptimizerKey(p.name, names[1]), Shape: p.shape, Data: p.m2})
		}
	}
	return out
}

// optNames are PyTorch's names of the optimizer's per-parameter buffers.
func (m *model) optNames() []string { return engine.OptimizerSlots(m.cfg.Optimizer) }

// State implements engine.Model.
func (m *model) State() engine.State {
	s := engine.State{Counters: map[string]int64{
		engine.CounterStep:      m.step,
		engine.CounterMicroStep: m.microStep,
		engine.CounterSeed:      int64(m.seed),
	}}
	for _, bn := range m.bns {
		s.Counters[bn.name+engine.SuffixBatchesTracked] = bn.tracked
	}
	for _, t := range m.stateTensors() {
		t.Shape = slices.Clone(t.Shape)
		t.Data = slices.Clone(t.Data)
		s.Tensors = append(s.Tensors, t)
	}
	return s
}

// SetState implements engine.Model.
func (m *model) SetState(s engine.State) (err error) {
	defer recoverErr(&err)
	want := m.stateTensors()
	byName := make(map[string]int, len(want))
	for i, t := range want {
		byName[t.Name] = i
	}
	seen := make([]bool, len(want))
	for _, t := range s.Tensors {
		i, ok := byName[t.Name]
		if !ok {
			return fmt.Errorf("state: unknown tensor %q (the model has %s)", t.Name, firstNames(want, 6))
		}
		if !slices.Equal(t.Shape, want[i].Shape) || len(t.Data) != len(want[i].Data) {
			return fmt.Errorf("state: %s has shape %v and %d values; the model's is %v", t.Name, t.Shape, len(t.Data), want[i].Shape)
		}
		seen[i] = true
	}
	var missing []string
	for i, ok := range seen {
		if !ok {
			missing = append(missing, want[i].Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("state: missing %d tensors: %s", len(missing), strings.Join(first(missing, 6), ", "))
	}
	for _, k := range []string{engine.CounterStep, engine.CounterMicroStep} {
		if _, ok := s.Counters[k]; !ok {
			return fmt.Errorf("state: missing counter %s", k)
		}
	}
	for _, t := range s.Tensors {
		copy(want[byName[t.Name]].Data, t.Data)
	}
	m.step = s.Counters[engine.CounterStep]
	m.microStep = s.Counters[engine.CounterMicroStep]
	if v, ok := s.Counters[engine.CounterSeed]; ok {
		m.seed = uint64(v)
	}
	for _, bn := range m.bns {
		bn.tracked = s.Counters[bn.name+engine.SuffixBatchesTracked]
		bn.pending = false
	}
	m.version++
	return nil
}

func firstNames(ts []engine.Tensor, n int) string {
	var names []string
	for _, t := range ts {
		names = append(names, t.Name)
	}
	return strings.Join(first(names, n), ", ")
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "…")
	}
	return s
}

// InitialState is the state a model built from g and cfg starts from:
// pipe's seeded initial parameters (each tensor drawn from its own stream
// of cfg.Seed and its name), the running statistics' initial values and
// zero optimizer buffers. Another engine starts from it, so that the same
// file gives the same starting weights on either.
// Only the parameters are built: no working memory is allocated, so a
// model too large for the host's memory has its initial state all the
// same.
func InitialState(g *stdlib.Graph, cfg engine.Config) (st engine.State, err error) {
	defer recoverErr(&err)
	cfg.Batch, cfg.Threads, cfg.Checkpoint = 1, 1, nil
	m, err := build(g, cfg, true)
	if err != nil {
		return engine.State{}, err
	}
	return m.State(), nil
}
