package torch

import (
	"fmt"

	"pipe/dataset/samples"
	"pipe/engine"
)

// Eval implements engine.Model: the first local rank evaluates the whole
// batch, the model as rank 0 holds it.
func (m *model) Eval(b *samples.Batch, out []float32) (float64, error) {
	if err := m.usable(); err != nil {
		return 0, err
	}
	if err := m.drainAll(); err != nil {
		return 0, err
	}
	if b == nil || b.N <= 0 {
		return 0, fmt.Errorf("%w: an empty batch", engine.ErrBadBatch)
	}
	ws, w := m.ws[0], m.workers[0]
	if err := m.fit(0, b.N, out != nil); err != nil {
		return 0, err
	}
	saved := m.cfg.Batch
	m.cfg.Batch = max(saved, b.N)
	ref, slot, _, err := m.fill(0, b, 0, b.N)
	m.cfg.Batch = saved
	if err != nil {
		return 0, err
	}
	if b.Y == nil {
		ref.Y, ref.Mask = nil, nil
	}
	req := evalRequest{batchRef: ref, Profile: m.prof != nil}
	o := b.N * numel(m.outShape)
	if out != nil {
		if len(out) < o {
			return 0, fmt.Errorf("%w: the output buffer holds %d values; %d samples of %v need %d", engine.ErrBadBatch, len(out), b.N, m.outShape, o)
		}
		req.Out = &regionRef{0, o}
	}
	if err := w.send(req, slot, b.N); err != nil {
		return 0, m.fail(err)
	}
	s := w.outstanding[len(w.outstanding)-1]
	r, err := m.reply(0)
	if err != nil {
		return 0, err
	}
	if err := replyErr(r, w.rank); err != nil {
		return 0, err
	}
	er, err := decodeReply[evalReply](r)
	if err != nil {
		return 0, err
	}
	m.keepSpans(s, er.Spans)
	if out != nil {
		copy(out[:o], ws.out.floats(0, o))
	}
	var loss float64
	if er.Loss != nil {
		loss = float64(*er.Loss)
	}
	return loss, nil
}

// fit grows local rank k's regions for a batch of n samples, the output
// region too when outputs are wanted.
func (m *model) fit(k, n int, outputs bool) error {
	ws := m.ws[k]
	if need := n * (m.xPer + 2*m.yPer); need > ws.slotFloats {
		if err := m.remap(k, &ws.in, slots*4*need); err != nil {
			return err
		}
		ws.slotFloats = need
	}
	if o := 4 * n * numel(m.outShape); outputs && o > ws.out.size() {
		return m.remap(k, &ws.out, o)
	}
	return nil
}

// remap replaces local rank k's region *r with a new one of size bytes,
// mapped by the worker before the old one is let go.
func (m *model) remap(k int, r **region, size int) error {
	name := (*r).name
	nr, err := newRegion(name, size)
	if err != nil {
		return err
	}
	if _, err := m.callK(k, mapRequest{Region: name, Path: nr.path, Size: nr.size()}); err != nil {
		nr.close()
		return err
	}
	nr.unlink()
	(*r).close()
	*r = nr
	return nil
}
