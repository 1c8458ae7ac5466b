package torch

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"pipe/dataset/samples"
	"pipe/engine"
)

// The training path: micro-batches queued to the workers, their replies
// filed as they come back, and the steps they finish.

// reply reads local rank k's next reply, watching every worker: a worker
// that dies ends the wait (another may be blocked in a collective with
// it), and then every worker is stopped.
func (m *model) reply(k int) (response, error) {
	w := m.workers[k]
	if len(w.outstanding) == 0 {
		return response{}, errors.New("torch: no command is waiting for a reply")
	}
	// A reply already here wins over a death: Go picks among ready cases
	// at random.
	ready := func() (response, bool) {
		select {
		case r, ok := <-w.replies:
			if ok {
				w.outstanding = w.outstanding[1:]
				return r, true
			}
		default:
		}
		return response{}, false
	}
	if r, ok := ready(); ok {
		return r, nil
	}
	// With other ranks, a reply that takes long may be a peer that
	// stalled inside a collective: say so while waiting. One ticker for
	// the model's life, not one a reply: this is every step's path.
	var slow <-chan time.Time
	if (m.world > 1 || m.interrupted) && !m.building {
		slow = m.ticker()
	}
	// After an interrupt, a wait on a stalled peer is given up (stall.go).
	cancel, start, next := m.cancel, time.Now(), stallReport
	var giveUp <-chan time.Time
	if m.interrupted {
		cancel, giveUp = nil, m.giveUp(w, start)
		if err := m.stopped(w, start); err != nil {
			return response{}, err
		}
	}
	for {
		select {
		case r, ok := <-w.replies:
			if ok {
				m.timed(w.outstanding[0], time.Since(start))
				w.outstanding = w.outstanding[1:]
				return r, nil
			}
			return response{}, m.fail(w.died())
		case <-cancel:
			if m.building {
				return response{}, m.fail(engine.ErrInterrupted)
			}
			cancel, m.interrupted = nil, true
			slow, giveUp = m.ticker(), m.giveUp(w, start)
			if err := m.stopped(w, start); err != nil {
				return response{}, err
			}
		case <-giveUp:
			return response{}, m.fail(m.stalled(w, start, ""))
		case <-slow:
			if m.interrupted {
				if err := m.stopped(w, start); err != nil {
					return response{}, err
				}
			}
			if m.world == 1 {
				continue
			}
			var due bool
			if due, next = stallDue(time.Since(start), next); !due {
				continue
			}
			w.log.Warn(fmt.Sprintf("rank %d has not answered %s for %s: a peer rank may be stalled; each collective times out after %s",
				w.rank, w.outstanding[0].cmd, time.Since(start).Round(time.Second), m.collective))
		case <-m.died:
			if r, ok := ready(); ok { // it came with the exit
				return r, nil
			}
			if o := m.firstDead(); o != nil {
				return response{}, m.fail(o.died())
			}
			return response{}, m.fail(errors.New("torch: a worker exited"))
		}
	}
}

// firstDead is the worker that exited first, nil while all run.
func (m *model) firstDead() *worker {
	var first *worker
	for _, o := range m.workers {
		select {
		case <-o.exited:
			if first == nil || o.exitedAt.Before(first.exitedAt) {
				first = o
			}
		default:
		}
	}
	return first
}

// peerGrace is how long a rank's failure waits for a peer's death to show
// before it is taken as the rank's own: a killed rank's peers fail in
// their collectives at once, often before its exit is reaped.
const peerGrace = 5 * time.Second

// replyErr is the error of rank k's reply r. A failure that is not the
// model's own (a non-finite loss, memory, an unsupported op, a bad batch)
// is laid on a local peer that died meanwhile, when one did: that death
// is the cause, and the rank's connection error its consequence.
func (m *model) replyErr(r response, k int) error {
	err := replyErr(r, m.workers[k].rank)
	if err != nil && collectiveTimedOut(r.Error) {
		for _, o := range m.workers {
			if o != m.workers[k] && processStopped(o.cmd.Process.Pid) {
				return m.fail(fmt.Errorf("%w; rank %d (pid %d) on this machine is stopped (SIGSTOP or a debugger)", err, o.rank, o.cmd.Process.Pid))
			}
		}
		return m.fail(err)
	}
	if err == nil || len(m.workers) < 2 || r.Kind != "" && r.Kind != kindError {
		return err
	}
	select {
	case <-m.died:
	case <-time.After(peerGrace):
		return err
	}
	if o := m.firstDead(); o != nil && o != m.workers[k] {
		return m.fail(o.died())
	}
	return err
}

// fail makes err the model's sticky error and stops every worker.
func (m *model) fail(err error) error {
	if m.err == nil {
		m.err = err
	}
	for _, w := range m.workers {
		if w.dead == nil {
			w.dead = m.err
			go w.kill()
		}
	}
	return m.err
}

// handle reads one reply of local rank k and files what it says: a
// micro-batch's loss, a finished step.
func (m *model) handle(k int) error {
	w, ws := m.workers[k], m.ws[k]
	s := w.outstanding[0]
	r, err := m.reply(k)
	if err != nil {
		return err
	}
	training := false
	switch s.cmd {
	case "train", "train+step", "step", "flush", "train_steps":
		training = true
	}
	if !r.OK && r.Kind == kindSkipped {
		// Sent behind a training command that failed, whose error was
		// returned when its reply was read.
		return nil
	}
	if err := m.replyErr(r, k); err != nil {
		// The steps of a train_steps command finished before its failure.
		ws.done = append(ws.done, doneOf(r.Done)...)
		if training && m.err == nil {
			// The worker refuses what was sent behind the failed command
			// (queued ahead) until this, which follows all of it.
			if serr := w.send(resumeRequest{}, -1, 0); serr != nil {
				return m.fail(serr)
			}
		}
		return err
	}
	if !training {
		return nil
	}
	// A step's and a flush's reply are a train reply's step part.
	tr, err := decodeReply[trainReply](r)
	if err != nil {
		return m.fail(fmt.Errorf("torch: the worker's reply to %s: %w", s.cmd, err))
	}
	if k == 0 {
		m.keepSpans(s, tr.Spans)
		m.addPhases(tr.Phases)
		for key, v := range tr.Applied {
			m.applied[key] = v
		}
	}
	if s.cmd == "train" || s.cmd == "train+step" {
		if tr.Loss != nil {
			ws.losses = append(ws.losses, float64(*tr.Loss))
			ws.ns = append(ws.ns, s.n)
		}
		if len(tr.GAN) > 0 {
			m.parts = m.parts[:0]
			for _, v := range tr.GAN {
				m.parts = append(m.parts, float64(v))
			}
		}
	}
	switch s.cmd {
	case "step", "train+step":
		if m.cfg.Engine.LossReadback != "lagged" {
			var st []micro
			for i, l := range ws.losses {
				st = append(st, micro{loss: l, n: ws.ns[i]})
			}
			ws.done = append(ws.done, st)
			ws.losses, ws.ns = nil, nil
		}
		ws.done = append(ws.done, doneOf(tr.Done)...)
		m.stopping = m.stopping || tr.Stop
	case "flush", "train_steps":
		ws.done = append(ws.done, doneOf(tr.Done)...)
	}
	return nil
}

func doneOf(ds []doneStep) [][]micro {
	var out [][]micro
	for _, d := range ds {
		var st []micro
		for i, l := range d.Losses {
			n := 0
			if i < len(d.N) {
				n = d.N[i]
			}
			st = append(st, micro{loss: float64(l), n: n})
		}
		out = append(out, st)
	}
	return out
}

// sendHeld sends the micro-batches kept back for their step's command.
func (m *model) sendHeld() error {
	for k, ws := range m.ws {
		if ws == nil { // still being set up
			continue
		}
		if h := ws.held; h != nil {
			ws.held = nil
			if err := m.workers[k].send(h.req, h.slot, h.n); err != nil {
				return m.fail(err)
			}
		}
	}
	return nil
}

// drainAll reads every outstanding reply of every worker.
func (m *model) drainAll() error {
	if err := m.sendHeld(); err != nil {
		return err
	}
	for k, w := range m.workers {
		for len(w.outstanding) > 0 {
			if err := m.handle(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// nodeRows are the rows of a batch of n that this node's ranks train on:
// their shards, which are contiguous. A node whose ranks have no rows (a
// batch smaller than the world) takes the first rows, which its ranks run
// with scale 0 (QueueTrain).
func (m *model) nodeRows(n int) (lo, hi int) {
	lo, _ = m.shard(n, 0)
	_, hi = m.shard(n, len(m.workers)-1)
	if hi == lo {
		return 0, min(2, n)
	}
	return lo, hi
}

// shard is local rank k's rows of a batch of n: the batch is cut into
// world contiguous runs whose sizes differ by at most one.
func (m *model) shard(n, k int) (lo, hi int) {
	r := m.base + k
	q, rem := n/m.world, n%m.world
	lo = r*q + min(r, rem)
	hi = lo + q
	if r < rem {
		hi++
	}
	return lo, hi
}

// fill copies rows [lo, hi) of b into a free input slot of local rank k
// and returns the command's batch references. A rank with no rows (a
// batch smaller than the world) is given the batch's first rows again
// with scale 0: DistributedDataParallel needs every rank in every
// backward pass, and its gradient adds nothing.
func (m *model) fill(k int, b *samples.Batch, lo, hi int) (ref batchRef, slot, n int, err error) {
	ws, w := m.ws[k], m.workers[k]
	n = hi - lo
	if n > m.cfg.Batch {
		return batchRef{}, 0, 0, fmt.Errorf("%w: %d samples for a model built for micro-batches of %d", engine.ErrBadBatch, n, m.cfg.Batch)
	}
	slot = ws.nextSlot
	ws.nextSlot = (ws.nextSlot + 1) % slots
	// The slot is free once the command that read it has replied.
	for slices.ContainsFunc(w.outstanding, func(s sent) bool { return s.slot == slot }) {
		if err := m.handle(k); err != nil {
			return batchRef{}, 0, 0, err
		}
	}
	ref, err = m.fillAt(k, b, lo, hi, slot*ws.slotFloats)
	return ref, slot, n, err
}

// fillAt copies rows [lo, hi) of b into local rank k's input region from
// the float at base on, where a batch of Config.Batch samples fits, and
// returns the command's batch references.
func (m *model) fillAt(k int, b *samples.Batch, lo, hi, base int) (batchRef, error) {
	ws, n := m.ws[k], hi-lo
	if n > m.cfg.Batch {
		return batchRef{}, fmt.Errorf("%w: %d samples for a model built for micro-batches of %d", engine.ErrBadBatch, n, m.cfg.Batch)
	}
	if ref, ok, err := m.rowsRef(b, lo, hi); ok {
		return ref, err
	}
	yPer, mPer := 0, 0
	if b.N > 0 {
		yPer, mPer = len(b.Y)/b.N, len(b.Mask)/b.N
	}
	if b.N*m.xPer != len(b.X) {
		return batchRef{}, fmt.Errorf("%w: the batch's inputs hold %d values for %d samples of %v", engine.ErrBadBatch, len(b.X), b.N, m.g.Input)
	}
	if yPer > m.yPer || mPer > m.yPer {
		return batchRef{}, fmt.Errorf("%w: the batch's targets hold %d values a sample; the model's output has %d", engine.ErrBadBatch, yPer, m.yPer)
	}
	cap := m.cfg.Batch
	put := func(part int, src []float32, per int) *regionRef {
		if src == nil {
			return nil
		}
		off := base + part
		dst := ws.in.floats(4*off, n*per)
		copy(dst, src[lo*per:hi*per])
		return &regionRef{4 * off, n * per}
	}
	return batchRef{N: n, X: put(0, b.X, m.xPer), Y: put(cap*m.xPer, b.Y, yPer), Mask: put(cap*(m.xPer+m.yPer), b.Mask, mPer)}, nil
}

// QueueTrain implements engine.Queuer.
func (m *model) QueueTrain(b *samples.Batch, scale float64, zero, last bool) error {
	if err := m.usable(); err != nil {
		return err
	}
	if b == nil || b.N <= 0 {
		return fmt.Errorf("%w: an empty batch", engine.ErrBadBatch)
	}
	whole := b.Whole() // the batch this node's part is of
	for k, w := range m.workers {
		lo, hi := m.shard(whole, k)
		s := scale * float64(hi-lo) * float64(m.world) / float64(whole)
		if hi == lo {
			lo, hi, s = 0, min(2, b.N), 0
		} else if lo, hi = lo-b.Offset, hi-b.Offset; lo < 0 || hi > b.N {
			return fmt.Errorf("%w: rank %d trains rows [%d, %d) of %d; the batch holds rows [%d, %d)",
				engine.ErrBadBatch, m.base+k, lo+b.Offset, hi+b.Offset, whole, b.Offset, b.Offset+b.N)
		}
		ref, slot, n, err := m.fill(k, b, lo, hi)
		if err != nil {
			return err
		}
		if s == 0 {
			n = 0 // its loss counts for nothing
		}
		req := trainRequest{batchRef: ref, Scale: s, Zero: zero, Sync: last, Profile: k == 0 && m.prof != nil}
		if last {
			m.ws[k].held = &heldTrain{req: req, slot: slot, n: n}
			continue
		}
		if err := w.send(req, slot, n); err != nil {
			return m.fail(err)
		}
	}
	return nil
}

// QueueStep implements engine.Queuer.
func (m *model) QueueStep(clip, lr float64) error {
	if err := m.usable(); err != nil {
		return err
	}
	for k, w := range m.workers {
		step := stepRequest{LR: lr, Clip: clip, Stop: m.stopAsked}
		if h := m.ws[k].held; h != nil {
			m.ws[k].held = nil
			h.req.Step = &step
			if err := w.sendAs(h.req, "train+step", h.slot, h.n); err != nil {
				return m.fail(err)
			}
			continue
		}
		if err := w.send(step, -1, 0); err != nil {
			return m.fail(err)
		}
	}
	return nil
}

// QueueSteps implements engine.Queuer: one train_steps command a worker,
// its batches side by side in one input slot. A gan, a profile and ranks
// in other processes (whose stop is agreed at every step) queue step by
// step.
func (m *model) QueueSteps(bs []*samples.Batch, lrs []float64, clip float64) error {
	if err := m.usable(); err != nil {
		return err
	}
	if len(bs) != len(lrs) {
		return fmt.Errorf("%w: %d batches and %d learning rates", engine.ErrInternal, len(bs), len(lrs))
	}
	if len(bs) == 1 || m.gan || m.prof != nil || !m.aheadOK() || m.stopAsked {
		return engine.QueueEach(m, bs, lrs, clip)
	}
	per := max(m.cfg.Batch, 1) * (m.xPer + 2*m.yPer)
	for k, w := range m.workers {
		if err := m.fit(k, len(bs)*max(m.cfg.Batch, 1), false); err != nil {
			return err
		}
		req := trainStepsRequest{Clip: clip, Steps: make([]stepBatch, 0, len(bs))}
		slot := -1
		for i, b := range bs {
			if b == nil || b.N <= 0 {
				return fmt.Errorf("%w: an empty batch", engine.ErrBadBatch)
			}
			whole := b.Whole()
			lo, hi := m.shard(whole, k)
			s := float64(hi-lo) * float64(m.world) / float64(whole)
			if hi == lo {
				lo, hi, s = 0, min(2, b.N), 0
			} else if lo, hi = lo-b.Offset, hi-b.Offset; lo < 0 || hi > b.N {
				return fmt.Errorf("%w: rank %d trains rows [%d, %d) of %d; the batch holds rows [%d, %d)",
					engine.ErrBadBatch, m.base+k, lo+b.Offset, hi+b.Offset, whole, b.Offset, b.Offset+b.N)
			}
			var ref batchRef
			var err error
			if i == 0 {
				ref, slot, _, err = m.fill(k, b, lo, hi)
			} else {
				ref, err = m.fillAt(k, b, lo, hi, slot*m.ws[k].slotFloats+i*per)
			}
			if err != nil {
				return err
			}
			req.Steps = append(req.Steps, stepBatch{batchRef: ref, Scale: s, LR: lrs[i]})
		}
		if err := w.send(req, slot, 0); err != nil {
			return m.fail(err)
		}
	}
	return nil
}

// Results implements engine.Queuer.
func (m *model) Results(wait bool) ([]engine.StepResult, error) {
	if err := m.usable(); err != nil {
		return nil, err
	}
	if wait && m.cfg.Engine.LossReadback == "lagged" {
		for _, w := range m.workers {
			if err := w.send(flushRequest{}, -1, 0); err != nil {
				return nil, m.fail(err)
			}
		}
	}
	var err error
	if wait || !m.aheadOK() {
		err = m.drainAll()
	} else {
		err = m.drainBefore()
	}
	return m.collect(), err
}

// aheadOK says the workers may be sent a step before the one before it
// has replied: every rank is this process's, so each is sent the same
// commands. Ranks in other processes each run ahead by what their own
// host allows, and a stop agreed at one step would find some already
// queued past it.
func (m *model) aheadOK() bool { return len(m.workers) == m.world }

// drainBefore reads the replies of every step but the last one queued:
// that one stays in flight, and the worker has the next step's command
// waiting in its pipe when it finishes it, so neither pipe's turnaround
// (the next batch copied in, the command encoded and read) nor a reply's
// wake-up is between two steps (docs/design/torch-protocol.md).
func (m *model) drainBefore() error {
	if err := m.sendHeld(); err != nil {
		return err
	}
	for k, w := range m.workers {
		for len(w.outstanding) > 0 && w.outstanding[0].step < w.steps {
			if err := m.handle(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// collect combines the ranks' finished steps: a micro-batch's loss is
// the mean of the ranks' losses weighted by their samples.
func (m *model) collect() []engine.StepResult {
	steps := math.MaxInt
	for _, ws := range m.ws {
		steps = min(steps, len(ws.done))
	}
	var out []engine.StepResult
	for i := 0; i < steps; i++ {
		var res engine.StepResult
		for j := 0; ; j++ {
			var sum float64
			var n, have int
			for _, ws := range m.ws {
				if j < len(ws.done[i]) {
					have++
					mc := ws.done[i][j]
					if mc.n > 0 {
						sum += mc.loss * float64(mc.n)
						n += mc.n
					}
				}
			}
			if have == 0 {
				break
			}
			if n > 0 {
				res.Losses = append(res.Losses, sum/float64(n))
			} else {
				res.Losses = append(res.Losses, math.NaN())
			}
		}
		out = append(out, res)
	}
	for _, ws := range m.ws {
		ws.done = ws.done[steps:]
	}
	return out
}

// TrainStep implements engine.Model.
func (m *model) TrainStep(b *samples.Batch, scale float64) (float64, error) {
	if err := m.QueueTrain(b, scale, false, true); err != nil {
		return 0, err
	}
	if err := m.drainAll(); err != nil {
		return 0, err
	}
	var sum float64
	var n int
	for _, ws := range m.ws {
		if len(ws.losses) == 0 {
			continue
		}
		l := ws.losses[len(ws.losses)-1]
		c := ws.ns[len(ws.ns)-1]
		ws.losses, ws.ns = ws.losses[:len(ws.losses)-1], ws.ns[:len(ws.ns)-1]
		sum += l * float64(c)
		n += c
	}
	if n == 0 {
		return math.NaN(), errors.New("torch: the worker returned no loss (lagged readback: use the Queuer interface)")
	}
	return sum / float64(n), nil
}

// Step implements engine.Model.
func (m *model) Step(lr float64) error {
	if err := m.QueueStep(0, lr); err != nil {
		return err
	}
	if err := m.drainAll(); err != nil {
		return err
	}
	for _, ws := range m.ws {
		ws.done = nil
	}
	return nil
}

// ZeroGrad implements engine.Model: the next micro-batch zeroes the
// gradients before it adds its own.
func (m *model) ZeroGrad() {
	if m.usable() != nil {
		return
	}
	for _, w := range m.workers {
		_ = w.send(zeroRequest{}, -1, 0)
	}
}

// ClipGradNorm implements engine.Model.
func (m *model) ClipGradNorm(max float64) (float64, error) {
	if err := m.usable(); err != nil {
		return 0, err
	}
	if err := m.drainAll(); err != nil {
		return 0, err
	}
	var norm float64
	for k := range m.workers {
		r, err := m.callK(k, clipRequest{Max: max})
		if err != nil {
			return 0, err
		}
		nr, err := decodeReply[normReply](r)
		if err != nil {
			return 0, err
		}
		if k == 0 && nr.Norm != nil {
			norm = float64(*nr.Norm)
		}
	}
	return norm, nil
}

// callK sends a command to local rank k and returns its reply.
func (m *model) callK(k int, req request) (response, error) {
	w := m.workers[k]
	if err := m.sendHeld(); err != nil {
		return response{}, err
	}
	for len(w.outstanding) > 0 {
		if err := m.handle(k); err != nil {
			return response{}, err
		}
	}
	if err := w.send(req, -1, 0); err != nil {
		return response{}, m.fail(err)
	}
	r, err := m.reply(k)
	if err != nil {
		return r, err
	}
	return r, m.replyErr(r, k)
}
