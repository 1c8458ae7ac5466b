package torch

import (
	"fmt"
	"slices"
	"strings"

	"pipe/engine"
)

// State implements engine.Model: rank 0's tensors, in pipe's names and
// layouts, so that either engine resumes from the checkpoint.
func (m *model) State() engine.State {
	st, err := m.state0()
	if err != nil {
		m.fail(err)
		return engine.State{Counters: map[string]int64{}}
	}
	return st
}

func (m *model) state0() (engine.State, error) {
	if err := m.usable(); err != nil {
		return engine.State{}, err
	}
	if err := m.drainAll(); err != nil {
		return engine.State{}, err
	}
	r, err := m.callK(0, getStateRequest{Layout: m.layout})
	if err != nil {
		return engine.State{}, err
	}
	sr, err := decodeReply[stateReply](r)
	if err != nil {
		return engine.State{}, err
	}
	st := engine.State{Counters: sr.Counters}
	reg := m.ws[0].st
	for _, e := range m.layout {
		st.Tensors = append(st.Tensors, engine.Tensor{Name: e.Name, Shape: slices.Clone(e.Shape),
			Data: slices.Clone(reg.floats(e.Offset, e.Count))})
	}
	return st, nil
}

// SetState implements engine.Model.
func (m *model) SetState(s engine.State) error {
	if err := m.usable(); err != nil {
		return err
	}
	if m.gan && !slices.ContainsFunc(s.Tensors, func(t engine.Tensor) bool { return strings.HasPrefix(t.Name, ganPrefix) }) {
		return errNoGAN
	}
	seen := make([]bool, len(m.layout))
	for _, t := range s.Tensors {
		i, ok := m.names[t.Name]
		if !ok {
			names := make([]string, 0, 6)
			for _, e := range m.layout[:min(6, len(m.layout))] {
				names = append(names, e.Name)
			}
			return fmt.Errorf("state: unknown tensor %q (the model has %s, …)", t.Name, strings.Join(names, ", "))
		}
		e := m.layout[i]
		if !slices.Equal(t.Shape, e.Shape) || len(t.Data) != e.Count {
			return fmt.Errorf("state: %s has shape %v and %d values; the model's is %v", t.Name, t.Shape, len(t.Data), e.Shape)
		}
		seen[i] = true
	}
	var missing []string
	for i, ok := range seen {
		if !ok {
			missing = append(missing, m.layout[i].Name)
		}
	}
	if len(missing) > 0 {
		if len(missing) > 6 {
			missing = append(missing[:6], "…")
		}
		return fmt.Errorf("state: missing %d tensors: %s", len(missing), strings.Join(missing, ", "))
	}
	for _, k := range []string{engine.CounterStep, engine.CounterMicroStep} {
		if _, ok := s.Counters[k]; !ok {
			return fmt.Errorf("state: missing counter %s", k)
		}
	}
	if err := m.drainAll(); err != nil {
		return err
	}
	for k, ws := range m.ws {
		for _, t := range s.Tensors {
			e := m.layout[m.names[t.Name]]
			copy(ws.st.floats(e.Offset, e.Count), t.Data)
		}
		if _, err := m.callK(k, setStateRequest{Layout: m.layout, Counters: s.Counters}); err != nil {
			return err
		}
		ws.losses, ws.ns, ws.done = nil, nil, nil
	}
	return nil
}
