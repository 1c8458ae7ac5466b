package torch

import (
	"time"

	"pipe/engine"
)

// Profiling (engine.Profiler). While it is on, rank 0's train and eval
// commands ask the worker to time every node (pipe_torch/timer.py): a
// node's forward by the clock around it, the device synchronised before
// each reading; its backward from the hook on its output's gradient to
// the next such hook; the loss on its own. The worker's times are
// offsets from the command's start, and the command's start is after pipe
// sent it: a span is placed at the send time plus its offset, which keeps
// it inside the clock pipe holds around the call, early by the command's
// trip to the worker. Off, no clock is read on either side.

// profile is a model's timing state; its Names are each node's name, as a one-node span's Nodes.
type profile struct{ engine.SpanLog }

// EnableProfile implements engine.Profiler.
func (m *model) EnableProfile(on bool) {
	if len(m.workers) > 0 {
		m.workers[0].stamp = on
	}
	if !on {
		m.prof = nil
		return
	}
	if m.prof != nil {
		return
	}
	p := &profile{engine.SpanLog{Names: make([][]string, len(m.g.Nodes))}}
	for i, n := range m.g.Nodes {
		p.Names[i] = []string{n.Name}
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

// workerPhases are the worker's phase codes.
var workerPhases = [...]engine.Phase{engine.PhaseForward, engine.PhaseBackward, engine.PhaseRecompute, engine.PhaseLoss}

// keepSpans keeps the spans a reply to command s carried.
func (m *model) keepSpans(s sent, spans [][4]int64) {
	p := m.prof
	if p == nil || len(spans) == 0 || s.at.IsZero() {
		return
	}
	for _, sp := range spans {
		id, ph := sp[0], sp[1]
		if ph < 0 || int(ph) >= len(workerPhases) || id >= int64(len(p.Names)) {
			continue
		}
		e := engine.Span{Phase: workerPhases[ph], Start: s.at.Add(time.Duration(sp[2])), Dur: time.Duration(sp[3])}
		if id >= 0 {
			e.Nodes = p.Names[id]
		}
		p.Spans = append(p.Spans, e)
	}
}
