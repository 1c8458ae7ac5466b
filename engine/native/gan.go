package native

import (
	"fmt"
	"math"

	"pipe/dataset/samples"
	"pipe/engine"
)

var _ engine.Adversarial = (*model)(nil)

// ForwardTrain implements engine.Adversarial: TrainStep's forward pass,
// with the outputs written NCHW; BackwardTrain finishes the step.
func (m *model) ForwardTrain(b *samples.Batch, out []float32) (err error) {
	defer recoverErr(&err)
	if err := m.usable(); err != nil {
		return err
	}
	if err := m.checkBatch(b, m.cfg.Batch, true); err != nil {
		return err
	}
	ol := m.units[m.outUnit].out
	if len(out) != b.N*ol.size() {
		return fmt.Errorf("%w: the output buffer holds %d values; %d samples of %v need %d", engine.ErrBadBatch, len(out), b.N, m.OutShape(), b.N*ol.size())
	}
	if !m.measured {
		defer m.measureHeap()
	}
	m.batch = b
	m.runForward(m.train, b.N, true, nil)
	toNCHW(out, m.train.predS, ol, b.N)
	return nil
}

// BackwardTrain implements engine.Adversarial.
func (m *model) BackwardTrain(scale float64, dout []float32) (loss float64, err error) {
	defer recoverErr(&err)
	b := m.batch
	if b == nil {
		return 0, fmt.Errorf("cpu: BackwardTrain without ForwardTrain")
	}
	defer func() { m.batch = nil }()
	s := m.train
	n := b.N
	ol := m.units[m.outUnit].out
	if s.seed == nil || (dout != nil && m.loss.throughLast) {
		return 0, fmt.Errorf("%w: a gradient given at the output needs a model with parameters whose loss reads its output itself", engine.ErrUnsupported)
	}
	loss = m.loss.eval(m, s, b, scale, true)
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, m.diagnose(s, b, loss)
	}
	if dout != nil {
		if len(dout) != n*ol.size() {
			return 0, fmt.Errorf("%w: the output gradient holds %d values; %d samples need %d", engine.ErrBadBatch, len(dout), n, n*ol.size())
		}
		if cap(m.ganTmp) < len(dout) {
			m.ganTmp = make([]float32, len(dout))
		}
		tmp := m.ganTmp[:len(dout)]
		fromNCHW(tmp, dout, ol, n)
		addTo(s.seedS[:len(tmp)], tmp)
	}
	m.runBackward(s, n)
	return loss, nil
}

// InputGrad implements engine.Adversarial.
func (m *model) InputGrad(n int, dst []float32) error {
	s := m.train
	if s == nil || s.inGradS == nil {
		return fmt.Errorf("%w: the model was not built with Config.InputGrad, or its input's gradient is never needed", engine.ErrUnsupported)
	}
	in := m.units[0].out
	if len(dst) != n*in.size() {
		return fmt.Errorf("%w: the input gradient buffer holds %d values; %d samples need %d", engine.ErrBadBatch, len(dst), n, n*in.size())
	}
	toNCHW(dst, s.inGradS, in, n)
	return nil
}

// HoldGrads implements engine.Adversarial: the gradients are copied aside
// and copied back.
func (m *model) HoldGrads(hold bool) {
	g := m.flat.grads
	if hold {
		m.heldGrads = append(m.heldGrads[:0], g...)
		return
	}
	if len(m.heldGrads) == len(g) {
		copy(g, m.heldGrads)
	}
}
