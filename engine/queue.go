package engine

import (
	"math"

	"pipe/dataset/samples"
)

// Sequential is the Queuer of a Model that computes in the caller's
// thread (the native engine): each call trains at once with the Model's
// own methods, and Results returns every step finished. It gives such a
// model the contract of QueueSteps, a unit of steps, as a loop. A
// failure (an error, or a loss that is not finite) stops the steps queued
// after it until Results has reported it, as an engine that runs ahead
// refuses them.
func Sequential(m Model) Queuer { return &sequential{m: m} }

type sequential struct {
	m    Model
	cur  []float64
	done []StepResult
	// failed: a step failed and was not stepped; err its error, nil when
	// the failure is a loss that is not finite (its result says so).
	failed bool
	err    error
}

// QueueTrain implements Queuer.
func (s *sequential) QueueTrain(b *samples.Batch, scale float64, zero, last bool) error {
	if s.failed {
		return nil
	}
	if zero {
		s.m.ZeroGrad()
	}
	l, err := s.m.TrainStep(b, scale)
	if err != nil {
		s.failed, s.err = true, err
		return nil
	}
	s.cur = append(s.cur, l)
	if math.IsNaN(l) || math.IsInf(l, 0) {
		// Reported with its step's losses, which the run loop reads; the
		// step is not taken.
		s.done = append(s.done, StepResult{Losses: s.cur})
		s.cur, s.failed = nil, true
	}
	return nil
}

// QueueStep implements Queuer.
func (s *sequential) QueueStep(clip, lr float64) error {
	if s.failed {
		s.cur = nil
		return nil
	}
	if clip > 0 {
		if _, err := s.m.ClipGradNorm(clip); err != nil {
			s.failed, s.err, s.cur = true, err, nil
			return nil
		}
	}
	if err := s.m.Step(lr); err != nil {
		s.failed, s.err, s.cur = true, err, nil
		return nil
	}
	s.done = append(s.done, StepResult{Losses: s.cur})
	s.cur = nil
	return nil
}

// QueueSteps implements Queuer: a loop of QueueTrain and QueueStep.
func (s *sequential) QueueSteps(bs []*samples.Batch, lrs []float64, clip float64) error {
	return QueueEach(s, bs, lrs, clip)
}

// QueueEach queues a unit of steps one step at a time, each batch its
// step's one micro-batch: QueueSteps for an engine that sends no unit.
func QueueEach(q interface {
	QueueTrain(b *samples.Batch, scale float64, zero, last bool) error
	QueueStep(clip, lr float64) error
}, bs []*samples.Batch, lrs []float64, clip float64) error {
	for i, b := range bs {
		if err := q.QueueTrain(b, 1, true, true); err != nil {
			return err
		}
		if err := q.QueueStep(clip, lrs[i]); err != nil {
			return err
		}
	}
	return nil
}

// Results implements Queuer: nothing is ever in flight.
func (s *sequential) Results(wait bool) ([]StepResult, error) {
	out, err := s.done, s.err
	s.done, s.err, s.failed = nil, nil, false // reported: what is queued from now on trains
	return out, err
}
