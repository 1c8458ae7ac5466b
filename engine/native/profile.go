package native

import (
	"time"

	"pipe/dataset/samples"
	"pipe/engine"
)

// Profiling (engine.Profiler). While it is on, runForward and runBackward
// read the clock before and after every unit and keep a span for it,
// named by the unit's graph nodes (a fusion group's are all its nodes:
// its time is the group's, not split among them), and the loss is timed
// as one span. Off, which is how a model starts, the only cost is a
// test of m.prof per unit: no clock is read and nothing is kept.

// now is the profile's clock; tests count its readings.
var now = time.Now

// profile is a model's timing state; its Names are each unit's nodes' names, shared by its spans.
type profile struct{ engine.SpanLog }

// EnableProfile implements engine.Profiler.
func (m *model) EnableProfile(on bool) {
	if !on {
		m.prof = nil
		return
	}
	if m.prof != nil {
		return
	}
	p := &profile{engine.SpanLog{Names: make([][]string, len(m.units))}}
	for i, u := range m.units {
		for _, n := range u.nodes {
			p.Names[i] = append(p.Names[i], n.Name)
		}
	}
	m.prof = p
}

// Profile implements engine.Profiler.
func (m *model) Profile() []engine.Span {
	if m.prof == nil {
		return nil
	}
	return m.prof.Take()
}

// span keeps the span of unit u (nil for the loss) that began at t0.
func (p *profile) span(u *unit, ph engine.Phase, t0 time.Time) {
	s := engine.Span{Phase: ph, Start: t0, Dur: now().Sub(t0)}
	if u != nil {
		s.Nodes = p.Names[u.idx]
	}
	p.Spans = append(p.Spans, s)
}

// timedLoss is m.loss.eval, timed while profiling.
func (m *model) timedLoss(s *sched, b *samples.Batch, scale float64, train bool) float64 {
	if m.prof == nil {
		return m.loss.eval(m, s, b, scale, train)
	}
	t0 := now()
	l := m.loss.eval(m, s, b, scale, train)
	m.prof.span(nil, engine.PhaseLoss, t0)
	return l
}
