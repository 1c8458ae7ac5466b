package planner

import (
	"fmt"
	"math"

	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/spec"
)

// Serving: how `pipe serve` answers requests (plan.Serve). Each auto
// choice (workers, max_wait, max_batch, queue, the request body limit)
// follows from the device and the serve block, with its reason: the
// largest batch whose roofline forward time plus max_wait fits the
// latency target and whose memory fits beside every worker's weights.
//
// Derivation: docs/design/serving.md.

// Serving constants.
const (
	ServeThreadsPerWorker  = 4
	ServeMaxWait           = 0.005
	ServeLatencyTarget     = 0.1
	ServeTimeout           = 30.0
	ServeMaxBatchCap       = 1024
	ServeMaxQueue          = 1 << 16
	ServeJSONBytesPerValue = 24
	ServeImageBody         = 16 << 20

	// An image model decodes an upload whole before resizing it to its
	// input, so the header's size is held to ServeDecodeFactor times the
	// input's pixels (4 times a side: more is resolution the resize
	// throws away), and never less than ServeDecodeFloorPixels (2048 x
	// 2048: a Full HD frame or a 2K photo is read for any model). A pixel
	// holds at most ServeDecodeBytesPerPixel while it decodes: a
	// progressive CMYK JPEG's 4 bytes of output and 16 of coefficients
	// (serve's decodeCost prices each image; its test holds it to this).
	ServeDecodeFactor        = 16
	ServeDecodeFloorPixels   = 2048 * 2048
	ServeDecodeBytesPerPixel = 20
)

// WithServe plans serving (plan.Serve) even when the file has no serve
// block, with every choice automatic: pipe serve asks for it.
func WithServe() Option { return func(c *config) { c.serve = true } }

// CodeServeLatency is the warning that no batch meets the latency target.
const CodeServeLatency = "serve-latency"

func (pl *planner) planServe() {
	sb := pl.sp.Serve
	if (sb == nil && !pl.cfg.serve) || pl.cost == nil || pl.graph == nil || pl.plan.GAN != nil {
		return
	}
	if sb == nil {
		sb = &spec.Serve{} // every choice automatic (WithServe)
	}
	sp := &servePlan{pl: pl, sb: sb, s: &plan.Serve{Precision: "fp32", Fits: true, Decisions: []plan.Decision{}},
		cpu: pl.dev.Kind == plan.BackendCPU, cores: max(pl.dev.Cores, 1)}
	pl.plan.Serve = sp.s
	sp.limits()
	sp.workers()
	if !sp.memory() {
		return
	}
	sp.batching()
	sp.body()
	if !sp.queue() {
		return
	}
	sp.precision()
}

// servePlan is planServe's work in phases, in the order of its
// decisions: what each phase decides is in s, and what a later phase
// needs of an earlier one is kept here.
type servePlan struct {
	pl    *planner
	sb    *spec.Serve
	s     *plan.Serve
	cpu   bool
	cores int

	w       int64 // the workers
	in, out int64 // one sample's input and output values
	static  int64 // one worker's weights and fixed buffers
	// room is what the budget leaves after the runtime and the workers'
	// static parts; batchRoom is the half of it the batches may take and
	// memBatch the batch that fits in that.
	room, batchRoom, memBatch int64
	// known: the device has peaks, so the forward time bounds the batch.
	known bool
}

func (sp *servePlan) decide(what, value, reason string) {
	sp.s.Decisions = append(sp.s.Decisions, plan.Decision{What: what, Value: value, Reason: reason})
}

// limits: precision, timeout and latency target, as written or the
// defaults.
func (sp *servePlan) limits() {
	s, sb := sp.s, sp.sb
	if sb.Precision != "" {
		s.Precision = sb.Precision
	}
	s.TimeoutSeconds = ServeTimeout
	if v := sb.Timeout; v != nil {
		s.TimeoutSeconds = *v
		sp.decide("timeout", FormatSeconds(*v), "as written: reading, answering and writing one request.")
	} else {
		sp.decide("timeout", FormatSeconds(ServeTimeout), "no timeout written: pipe's default for reading, answering and writing one request.")
	}
	s.LatencyTargetSeconds = ServeLatencyTarget
	if v := sb.LatencyTarget; v != nil {
		s.LatencyTargetSeconds = *v
	}
}

// workers: how many models serve, and their threads.
func (sp *servePlan) workers() {
	s, dev := sp.s, sp.pl.dev
	if v, ok := sp.sb.Workers.Fixed(); ok {
		s.Workers = int(v)
		sp.decide("workers", fmt.Sprint(s.Workers), "as written.")
	} else if sp.cpu {
		s.Workers = max(1, sp.cores/ServeThreadsPerWorker)
		sp.decide("workers", fmt.Sprint(s.Workers), fmt.Sprintf("workers auto: one per %d of the %s's %d cores (at least one), each running its batch on its share of the cores.",
			ServeThreadsPerWorker, dev.Name, sp.cores))
	} else {
		s.Workers = 1
		sp.decide("workers", "1", fmt.Sprintf("workers auto: one model on %s; more would share the device and its memory without adding compute.", dev.Name))
	}
	s.ThreadsPerWorker = 1
	if sp.cpu {
		s.ThreadsPerWorker = max(1, sp.cores/s.Workers)
	}
	sp.w = int64(s.Workers)
}

// memory: the room the process has, each worker's fixed part, and what
// a sample adds; false, with an error, when the workers do not fit.
func (sp *servePlan) memory() bool {
	pl, s, sb, m, g := sp.pl, sp.s, sp.sb, sp.pl.cost, sp.pl.graph
	sp.in, sp.out = numel(g.Input), numel(g.OutShape())
	var evalPer int64
	if m.cpu != nil {
		folds := pl.foldBytes()
		evalPer = m.eval
		sp.static = sum(m.static.parameters, sub(m.cpu.fixedEval, m.folds), folds)
	} else {
		evalPer = forwardPeak(m)
		sp.static = m.static.parameters
		if sp.static == 0 {
			sp.static = mul(pl.plan.Parameters, 4)
		}
	}
	s.WorkerStaticBytes = sp.static
	s.SampleBytes = sum(evalPer, mul(sp.in, 4), mul(sp.out, 4))
	budget := pl.plan.Memory.Budget
	s.Budget = budget
	room := budget
	if sp.cpu {
		room = sub(room, m.static.runtime)
		if m.gcDiv > 0 && room > 0 {
			room = room / (m.gcDiv + 1) * m.gcDiv
		}
	}
	sp.room = sub(room, mul(sp.w, sp.static))
	if sp.room <= 0 {
		s.Fits = false
		at := sb.At.Written("workers")
		if at == nil && pl.sp.Serve != nil {
			at = &sb.At.KindRange
		}
		pl.errorf(at, CodeNoFit, "the serving workers do not fit",
			"%d workers of %s of weights and fixed buffers each need more than the %s budget of %s. Write fewer workers in the serve block.",
			s.Workers, FormatBytes(sp.static), FormatBytes(budget), pl.dev.Name)
		return false
	}
	sp.batchRoom = sp.room / 2
	sp.memBatch = sp.batchRoom / max(mul(sp.w, s.SampleBytes), 1)
	sp.known = sp.fwd(1) > 0
	return true
}

// fwd is the forward time of one worker at batch b, every worker running.
func (sp *servePlan) fwd(b int64) float64 {
	pl, g := sp.pl, sp.pl.graph
	ls := make([]plan.Layer, len(g.Nodes))
	stepTime(g, pl.cost, pl.dev, pl.plan.Precision, b, 1, nil, pl.group, pl.fused, ls)
	var t float64
	for _, l := range ls {
		if l.Roofline != nil {
			t += l.Roofline.ForwardSeconds
		}
	}
	return t * float64(sp.w)
}

// latencyBatch is the largest batch (up to the cap) whose forward time
// plus max_wait is within the latency target: 1 when not even one
// sample's is, the cap when the device has no known peaks.
func (sp *servePlan) latencyBatch() int64 {
	s := sp.s
	if !sp.known {
		return ServeMaxBatchCap
	}
	if sp.fwd(1)+s.MaxWaitSeconds > s.LatencyTargetSeconds {
		return 1
	}
	lo, hi := int64(1), int64(ServeMaxBatchCap)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if sp.fwd(mid)+s.MaxWaitSeconds <= s.LatencyTargetSeconds {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// batching: max_wait and max_batch, each bounding the other (a batch of
// one waits for no company), and the warning that no batch meets the
// latency target.
func (sp *servePlan) batching() {
	pl, s, sb := sp.pl, sp.s, sp.sb
	maxWait, maxWaitFixed := sb.MaxWait.Fixed()
	s.MaxWaitSeconds = min(ServeMaxWait, s.LatencyTargetSeconds/10)
	waitWhy := fmt.Sprintf("max_wait auto: %s, or a tenth of the %s latency target when that is less, so waiting for company costs little of it.",
		FormatSeconds(ServeMaxWait), FormatSeconds(s.LatencyTargetSeconds))
	if maxWaitFixed {
		s.MaxWaitSeconds = maxWait
		waitWhy = "as written."
	}

	latBatch := sp.latencyBatch()
	if mb, ok := sb.MaxBatch.Fixed(); ok {
		s.MaxBatch = mb
		if s.MaxBatch > sp.memBatch {
			s.Fits = false
			pl.errorf(sb.At.Written("max_batch"), CodeNoFit, fmt.Sprintf("max_batch %d does not fit %s", s.MaxBatch, pl.dev.Name),
				"%d workers at %d samples need %s for their batches (%s a sample); half of what the weights leave of the budget, %s, is theirs: %d samples fit. Write max_batch auto, or at most %d.",
				s.Workers, s.MaxBatch, FormatBytes(mul(mul(sp.w, s.MaxBatch), s.SampleBytes)), FormatBytes(s.SampleBytes), FormatBytes(sp.batchRoom), max(sp.memBatch, 0), max(sp.memBatch, 1))
		}
		sp.decide("max_batch", fmt.Sprint(s.MaxBatch), "as written.")
	} else {
		s.MaxBatch = max(1, min(latBatch, sp.memBatch, ServeMaxBatchCap))
		why := fmt.Sprintf("max_batch auto: the smallest of the latency bound (%d), the memory bound (%d: half of the %s the workers' weights leave, at %s a sample per worker) and pipe's cap (%d).",
			latBatch, sp.memBatch, FormatBytes(sp.room), FormatBytes(s.SampleBytes), ServeMaxBatchCap)
		if sp.known {
			why += fmt.Sprintf(" Latency: the largest batch whose roofline forward time on one worker of %d (%s at %d) plus max_wait %s is within the latency target %s.",
				s.Workers, FormatSeconds(sp.fwd(s.MaxBatch)), s.MaxBatch, FormatSeconds(s.MaxWaitSeconds), FormatSeconds(s.LatencyTargetSeconds))
		} else {
			why += fmt.Sprintf(" %s has no known peaks, so the latency gives no bound.", pl.dev.Name)
		}
		sp.decide("max_batch", fmt.Sprint(s.MaxBatch), why)
	}
	if sp.known && sp.fwd(1)+s.MaxWaitSeconds > s.LatencyTargetSeconds {
		pl.warnf(sb.At.Written("latency_target"), CodeServeLatency, "no batch meets the latency target",
			"One sample's estimated forward time on one worker of %d is %s; with max_wait %s that is over the %s target, so batching is off (max_batch 1). Give a larger latency_target, fewer workers, or a faster device.",
			s.Workers, FormatSeconds(sp.fwd(1)), FormatSeconds(s.MaxWaitSeconds), FormatSeconds(s.LatencyTargetSeconds))
	}
	if s.MaxBatch == 1 && !maxWaitFixed {
		s.MaxWaitSeconds = 0
		waitWhy = "max_wait auto: batching is off (max_batch 1), so a request never waits for another."
	}
	sp.decide("max_wait", FormatSeconds(s.MaxWaitSeconds), waitWhy)
	if sp.known {
		s.ForwardSeconds = significant(sp.fwd(s.MaxBatch), 4)
	}
}

// body: the request body limit, and what a request holds in memory.
func (sp *servePlan) body() {
	s, g := sp.s, sp.pl.graph
	s.MaxBodyBytes = add(mul(mul(s.MaxBatch, sp.in), ServeJSONBytesPerValue), 64<<10)
	bodyWhy := fmt.Sprintf("%d samples of %d values as JSON (%d characters a value) and 64 KiB", s.MaxBatch, sp.in, ServeJSONBytesPerValue)
	if len(g.Input) == 3 && s.MaxBodyBytes < ServeImageBody {
		s.MaxBodyBytes = ServeImageBody
		bodyWhy = fmt.Sprintf("an image model: room for one encoded image of up to %s, more than %s", FormatBytes(ServeImageBody), bodyWhy)
	}
	sp.decide("body limit", FormatBytes(s.MaxBodyBytes), bodyWhy+"; a larger body gets 413.")
	s.RequestBytes = add(s.MaxBodyBytes, mul(s.MaxBatch, mul(add(sp.in, sp.out), 4)))
}

// queue: an image model's decodes, then the queue in what they leave,
// and the process's memory in all; false, with an error, when not one
// decode fits.
func (sp *servePlan) queue() bool {
	pl, s, sb, w := sp.pl, sp.s, sp.sb, sp.w
	queueRoom := sub(sp.room, mul(mul(w, s.MaxBatch), s.SampleBytes))
	if in := pl.graph.Input; len(in) == 3 && (in[0] == 1 || in[0] == 3) {
		if !pl.planDecodes(s, sb, in[1], in[2], sp.cores, queueRoom) {
			return false
		}
		queueRoom = sub(queueRoom, mul(s.Decodes, s.DecodeBytes))
	}
	memQueue := queueRoom / max(s.RequestBytes, 1)
	if q, ok := sb.Queue.Fixed(); ok {
		s.Queue = q
		if s.Queue > memQueue {
			pl.warnf(sb.At.Written("queue"), "serve-queue-memory", fmt.Sprintf("a full queue of %d requests may not fit", s.Queue),
				"Each admitted request holds up to %s (a full body and its decoded samples); %s is left after the workers, room for %d.",
				FormatBytes(s.RequestBytes), FormatBytes(queueRoom), memQueue)
		}
		sp.decide("queue", fmt.Sprint(s.Queue), "as written: past it the server answers 503.")
	} else {
		q := min(memQueue, ServeMaxQueue)
		why := fmt.Sprintf("queue auto: %d requests of at most %s each fit in the %s the workers leave", memQueue, FormatBytes(s.RequestBytes), FormatBytes(queueRoom))
		if sp.known {
			rate := float64(w) * float64(s.MaxBatch) / (sp.fwd(s.MaxBatch) + s.MaxWaitSeconds)
			byTime := int64(math.Min(rate*s.TimeoutSeconds, ServeMaxQueue))
			why += fmt.Sprintf("; the workers answer about %.0f samples/s (estimate), %d within the %s timeout, and a request waiting longer fails anyway", rate, byTime, FormatSeconds(s.TimeoutSeconds))
			q = min(q, max(byTime, mul(w, s.MaxBatch)))
		}
		s.Queue = max(q, 1)
		sp.decide("queue", fmt.Sprint(s.Queue), why+"; past it the server answers 503 with Retry-After.")
	}
	s.Memory = sum(pl.cost.static.runtime, mul(w, sp.static), mul(mul(w, s.MaxBatch), s.SampleBytes), mul(s.Queue, s.RequestBytes), mul(s.Decodes, s.DecodeBytes))
	return true
}

// precision: int8's calibration and whether this plan's engine runs it.
func (sp *servePlan) precision() {
	pl, s, sb := sp.pl, sp.s, sp.sb
	if s.Precision != "int8" {
		sp.decide("precision", "fp32", "as trained.")
		return
	}
	s.CalibrateBatches = 8
	if v := sb.Calibrate; v != nil {
		s.CalibrateBatches = *v
	}
	why := fmt.Sprintf("as written: dense and conv weights quantised per channel, activation scales calibrated on %d training batches.", s.CalibrateBatches)
	if !pl.traits().Int8 {
		why += " int8 runs on the " + pl.enginesWith(func(t cost.Traits) bool { return t.Int8 }) + " engine only: pipe serve refuses it on this plan's engine."
	} else {
		why += pl.int8Speed(sb.At.Written("precision"))
	}
	sp.decide("precision", "int8", why)
}

// planDecodes bounds an image model's decodes: the largest image its
// header may claim (max_decode_factor times the h x w input, at least
// ServeDecodeFloorPixels), what one decode holds, and how many run at
// once (decodes: auto is one per core, as decoding is CPU work, within
// half of room). It returns false, with an error, when not one fits.
func (pl *planner) planDecodes(s *plan.Serve, sb *spec.Serve, h, w int64, cores int, room int64) bool {
	decide := func(what, value, reason string) {
		s.Decisions = append(s.Decisions, plan.Decision{What: what, Value: value, Reason: reason})
	}
	factor, why := int64(ServeDecodeFactor), fmt.Sprintf("max_decode_factor %d (the default: 4 times a side)", ServeDecodeFactor)
	if v := sb.MaxDecodeFactor; v != nil {
		factor, why = *v, fmt.Sprintf("max_decode_factor %d as written", *v)
	}
	s.MaxDecodePixels = max(mul(factor, mul(h, w)), ServeDecodeFloorPixels)
	s.DecodeBytes = mul(s.MaxDecodePixels, ServeDecodeBytesPerPixel)
	decide("decode limit", fmt.Sprintf("%d pixels", s.MaxDecodePixels), fmt.Sprintf(
		"an image model: an upload's header may claim at most %s times the %dx%d input's pixels (%d), and at least %d (2048x2048); a larger one gets 413 before it is decoded. One decode holds at most %s (%d bytes a pixel, the most a decoder keeps).",
		why, h, w, mul(factor, mul(h, w)), ServeDecodeFloorPixels, FormatBytes(s.DecodeBytes), ServeDecodeBytesPerPixel))
	fit := room / max(s.DecodeBytes, 1)
	if v, ok := sb.Decodes.Fixed(); ok {
		s.Decodes = v
		decide("decodes", fmt.Sprint(s.Decodes), fmt.Sprintf("as written: %s of decode memory; a request waits, within its timeout, for a slot.", FormatBytes(mul(s.Decodes, s.DecodeBytes))))
	} else {
		s.Decodes = max(1, min(int64(cores), fit/2))
		decide("decodes", fmt.Sprint(s.Decodes), fmt.Sprintf(
			"decodes auto: one per core (%d), as decoding is CPU work and more at once would hold memory without finishing sooner, within half of the %s the workers' batches leave (room for %d of %s); %s in all. A request waits, within its timeout, for a slot.",
			cores, FormatBytes(room), max(fit/2, 0), FormatBytes(s.DecodeBytes), FormatBytes(mul(s.Decodes, s.DecodeBytes))))
	}
	if s.Decodes > fit {
		s.Fits = false
		at := sb.At.Written("decodes")
		if at == nil {
			at = sb.At.Written("max_decode_factor")
		}
		if at == nil && pl.sp.Serve != nil {
			at = &sb.At.KindRange
		}
		pl.errorf(at, CodeNoFit, "the image decodes do not fit",
			"%d decodes of up to %s each (images of %d pixels) need more than the %s the workers' batches leave of the %s budget. Write a smaller max_decode_factor or fewer decodes in the serve block.",
			s.Decodes, FormatBytes(s.DecodeBytes), s.MaxDecodePixels, FormatBytes(room), FormatBytes(s.Budget))
		return false
	}
	return true
}

// foldBytes is the evaluation's folded conv weights (a batchnorm folded
// into the conv before it), which the CPU executor keeps beside the
// trained ones.
func (pl *planner) foldBytes() int64 {
	var folds int64
	for _, f := range pl.plan.Fusion.InferenceFolds {
		for _, nd := range pl.graph.Nodes {
			if nd.Name == f[0] && len(nd.Out) > 0 {
				folds = add(folds, mul(add(nd.Params, nd.Out[0]), 4))
			}
		}
	}
	return folds
}

// forwardPeak is a forward pass's working memory per sample when each
// output lives until its last reader (an inference forward keeps nothing
// for a backward pass): the largest sum of live outputs.
func forwardPeak(m *costModel) int64 {
	c := m.ch
	n := len(c.out)
	free := make([][]int, n+1)
	for j := range n {
		if l := c.last[j]; l >= 0 && l <= n {
			free[l] = append(free[l], j)
		}
	}
	var live, peak int64
	for i := range n {
		live = add(live, c.out[i])
		peak = max(peak, live)
		for _, j := range free[i] {
			live = sub(live, c.out[j])
		}
	}
	return peak
}
