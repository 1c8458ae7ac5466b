package enginetest

import (
	"pipe/dataset/samples"
	"pipe/engine"
)

// The fake's engine.Queuer (Backend.Ahead): it runs ahead as the torch
// engine does, reporting each step only once the next one is queued.

// outcome is a queued step as Results reports it.
type outcome struct {
	res     engine.StepResult
	err     error
	skipped bool // queued behind a failure not yet reported: not trained
}

// QueueTrain implements engine.Queuer: the micro-batch trains now; a
// failure is held for Results, and the steps queued behind it until it is
// reported are not trained.
func (m *Model) QueueTrain(b *samples.Batch, scale float64, zero, last bool) error {
	if m.failing {
		m.curSkip = true
		return nil
	}
	if zero {
		m.ZeroGrad()
	}
	l, err := m.TrainStep(b, scale)
	if err != nil {
		m.curErr, m.failing = err, true
		return nil
	}
	m.cur = append(m.cur, l)
	return nil
}

// QueueStep implements engine.Queuer.
func (m *Model) QueueStep(clip, lr float64) error {
	var o outcome
	switch {
	case m.curErr != nil:
		o.err = m.curErr
	case m.curSkip:
		o.skipped = true
	default:
		if clip > 0 {
			_, _ = m.ClipGradNorm(clip)
		}
		if err := m.Step(lr); err != nil {
			o.err, m.failing = err, true
		}
		o.res.Losses = m.cur
	}
	m.queued = append(m.queued, o)
	m.cur, m.curErr, m.curSkip = nil, nil, false
	return nil
}

// Results implements engine.Queuer: without wait, the step queued last is
// still in flight.
func (m *Model) Results(wait bool) ([]engine.StepResult, error) {
	n := len(m.queued)
	if !wait && n > 0 {
		n--
	}
	var out []engine.StepResult
	for range n {
		o := m.queued[0]
		m.queued = m.queued[1:]
		switch {
		case o.skipped:
		case o.err != nil:
			m.failing = false // reported: what is queued from now on trains
			return out, o.err
		default:
			out = append(out, o.res)
		}
	}
	return out, nil
}

// QueueSteps implements engine.Queuer: a loop, each step reported on its
// own.
func (m *Model) QueueSteps(bs []*samples.Batch, lrs []float64, clip float64) error {
	return engine.QueueEach(m, bs, lrs, clip)
}
