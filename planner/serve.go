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
	p, g, m := pl.plan, pl.graph, pl.cost
	s := &plan.Serve{Precision: "fp32", Fits: true, Decisions: []plan.Decision{}}
	p.Serve = s
	decide := func(what, value, reason string) {
		s.Decisions = append(s.Decisions, plan.Decision{What: what, Value: value, Reason: reason})
	}
	if sb == nil {
		sb = &spec.Serve{} // every choice automatic (WithServe)
	}
	cpu := pl.dev.Kind == plan.BackendCPU
	cores := max(pl.dev.Cores, 1)

	// Precision, timeout, latency target: as written or the defaults.
	if sb.Precision != "" {
		s.Precision = sb.Precision
	}
	s.TimeoutSeconds = ServeTimeout
	if v := sb.Timeout; v != nil {
		s.TimeoutSeconds = *v
		decide("timeout", FormatSeconds(*v), "as written: reading, answering and writing one request.")
	} else {
		decide("timeout", FormatSeconds(ServeTimeout), "no timeout written: pipe's default for reading, answering and writing one request.")
	}
	s.LatencyTargetSeconds = ServeLatencyTarget
	if v := sb.LatencyTarget; v != nil {
		s.LatencyTargetSeconds = *v
	}

	// Workers and their threads.
	if v, ok := sb.Workers.Fixed(); ok {
		s.Workers = int(v)
		decide("workers", fmt.Sprint(s.Workers), "as written.")
	} else if cpu {
		s.Workers = max(1, cores/ServeThreadsPerWorker)
		decide("workers", fmt.Sprint(s.Workers), fmt.Sprintf("workers auto: one per %d of the %s's %d cores (at least one), each running its batch on its share of the cores.",
			ServeThreadsPerWorker, pl.dev.Name, cores))
	} else {
		s.Workers = 1
		decide("workers", "1", fmt.Sprintf("workers auto: one model on %s; more would share the device and its memory without adding compute.", pl.dev.Name))
	}
	s.ThreadsPerWorker = 1
	if cpu {
		s.ThreadsPerWorker = max(1, cores/s.Workers)
	}
	w := int64(s.Workers)

	// Memory: the room the process has, each worker's fixed part, and
	// what a sample and a request add.
	in, out := numel(g.Input), numel(g.OutShape())
	var evalPer, static int64
	if m.cpu != nil {
		folds := pl.foldBytes()
		evalPer = m.eval
		static = sum(m.static.parameters, sub(m.cpu.fixedEval, m.folds), folds)
	} else {
		evalPer = forwardPeak(m)
		static = m.static.parameters
		if static == 0 {
			static = mul(p.Parameters, 4)
		}
	}
	s.WorkerStaticBytes = static
	s.SampleBytes = sum(evalPer, mul(in, 4), mul(out, 4))
	budget := p.Memory.Budget
	s.Budget = budget
	room := budget
	if cpu {
		room = sub(room, m.static.runtime)
		if m.gcDiv > 0 && room > 0 {
			room = room / (m.gcDiv + 1) * m.gcDiv
		}
	}
	room = sub(room, mul(w, static))
	if room <= 0 {
		s.Fits = false
		at := sb.At.Written("workers")
		if at == nil && pl.sp.Serve != nil {
			at = &sb.At.KindRange
		}
		pl.errorf(at, CodeNoFit, "the serving workers do not fit",
			"%d workers of %s of weights and fixed buffers each need more than the %s budget of %s. Write fewer workers in the serve block.",
			s.Workers, FormatBytes(static), FormatBytes(budget), pl.dev.Name)
		return
	}
	batchRoom := room / 2
	memBatch := batchRoom / max(mul(w, s.SampleBytes), 1)

	// The forward time of one worker at batch b, every worker running.
	prec := p.Precision
	fwd := func(b int64) float64 {
		ls := make([]plan.Layer, len(g.Nodes))
		stepTime(g, m, pl.dev, prec, b, 1, nil, pl.group, pl.fused, ls)
		var s float64
		for _, l := range ls {
			if l.Roofline != nil {
				s += l.Roofline.ForwardSeconds
			}
		}
		return s * float64(w)
	}
	known := fwd(1) > 0

	// max_wait.
	maxWait, maxWaitFixed := sb.MaxWait.Fixed()
	s.MaxWaitSeconds = min(ServeMaxWait, s.LatencyTargetSeconds/10)
	waitWhy := fmt.Sprintf("max_wait auto: %s, or a tenth of the %s latency target when that is less, so waiting for company costs little of it.",
		FormatSeconds(ServeMaxWait), FormatSeconds(s.LatencyTargetSeconds))
	if maxWaitFixed {
		s.MaxWaitSeconds = maxWait
		waitWhy = "as written."
	}

	// max_batch.
	latBatch := int64(ServeMaxBatchCap)
	if known {
		if fwd(1)+s.MaxWaitSeconds > s.LatencyTargetSeconds {
			latBatch = 1
		} else {
			lo, hi := int64(1), int64(ServeMaxBatchCap)
			for lo < hi {
				mid := (lo + hi + 1) / 2
				if fwd(mid)+s.MaxWaitSeconds <= s.LatencyTargetSeconds {
					lo = mid
				} else {
					hi = mid - 1
				}
			}
			latBatch = lo
		}
	}
	if mb, ok := sb.MaxBatch.Fixed(); ok {
		s.MaxBatch = mb
		if s.MaxBatch > memBatch {
			s.Fits = false
			pl.errorf(sb.At.Written("max_batch"), CodeNoFit, fmt.Sprintf("max_batch %d does not fit %s", s.MaxBatch, pl.dev.Name),
				"%d workers at %d samples need %s for their batches (%s a sample); half of what the weights leave of the budget, %s, is theirs: %d samples fit. Write max_batch auto, or at most %d.",
				s.Workers, s.MaxBatch, FormatBytes(mul(mul(w, s.MaxBatch), s.SampleBytes)), FormatBytes(s.SampleBytes), FormatBytes(batchRoom), max(memBatch, 0), max(memBatch, 1))
		}
		decide("max_batch", fmt.Sprint(s.MaxBatch), "as written.")
	} else {
		s.MaxBatch = max(1, min(latBatch, memBatch, ServeMaxBatchCap))
		why := fmt.Sprintf("max_batch auto: the smallest of the latency bound (%d), the memory bound (%d: half of the %s the workers' weights leave, at %s a sample per worker) and pipe's cap (%d).",
			latBatch, memBatch, FormatBytes(room), FormatBytes(s.SampleBytes), ServeMaxBatchCap)
		if known {
			why += fmt.Sprintf(" Latency: the largest batch whose roofline forward time on one worker of %d (%s at %d) plus max_wait %s is within the latency target %s.",
				s.Workers, FormatSeconds(fwd(s.MaxBatch)), s.MaxBatch, FormatSeconds(s.MaxWaitSeconds), FormatSeconds(s.LatencyTargetSeconds))
		} else {
			why += fmt.Sprintf(" %s has no known peaks, so the latency gives no bound.", pl.dev.Name)
		}
		decide("max_batch", fmt.Sprint(s.MaxBatch), why)
	}
	if known && fwd(1)+s.MaxWaitSeconds > s.LatencyTargetSeconds {
		pl.warnf(sb.At.Written("latency_target"), CodeServeLatency, "no batch meets the latency target",
			"One sample's estimated forward time on one worker of %d is %s; with max_wait %s that is over the %s target, so batching is off (max_batch 1). Give a larger latency_target, fewer workers, or a faster device.",
			s.Workers, FormatSeconds(fwd(1)), FormatSeconds(s.MaxWaitSeconds), FormatSeconds(s.LatencyTargetSeconds))
	}
	if s.MaxBatch == 1 && !maxWaitFixed {
		s.MaxWaitSeconds = 0
		waitWhy = "max_wait auto: batching is off (max_batch 1), so a request never waits for another."
	}
	decide("max_wait", FormatSeconds(s.MaxWaitSeconds), waitWhy)
	if known {
		s.ForwardSeconds = significant(fwd(s.MaxBatch), 4)
	}

	// The body limit and a request's memory.
	s.MaxBodyBytes = add(mul(mul(s.MaxBatch, in), ServeJSONBytesPerValue), 64<<10)
	bodyWhy := fmt.Sprintf("%d samples of %d values as JSON (%d characters a value) and 64 KiB", s.MaxBatch, in, ServeJSONBytesPerValue)
	if len(g.Input) == 3 && s.MaxBodyBytes < ServeImageBody {
		s.MaxBodyBytes = ServeImageBody
		bodyWhy = fmt.Sprintf("an image model: room for one encoded image of up to %s, more than %s", FormatBytes(ServeImageBody), bodyWhy)
	}
	decide("body limit", FormatBytes(s.MaxBodyBytes), bodyWhy+"; a larger body gets 413.")
	s.RequestBytes = add(s.MaxBodyBytes, mul(s.MaxBatch, mul(add(in, out), 4)))

	// Image decodes, then the queue in what they leave.
	queueRoom := sub(room, mul(mul(w, s.MaxBatch), s.SampleBytes))
	if in := g.Input; len(in) == 3 && (in[0] == 1 || in[0] == 3) {
		if !pl.planDecodes(s, sb, in[1], in[2], cores, queueRoom) {
			return
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
		decide("queue", fmt.Sprint(s.Queue), "as written: past it the server answers 503.")
	} else {
		q := min(memQueue, ServeMaxQueue)
		why := fmt.Sprintf("queue auto: %d requests of at most %s each fit in the %s the workers leave", memQueue, FormatBytes(s.RequestBytes), FormatBytes(queueRoom))
		if known {
			rate := float64(w) * float64(s.MaxBatch) / (fwd(s.MaxBatch) + s.MaxWaitSeconds)
			byTime := int64(math.Min(rate*s.TimeoutSeconds, ServeMaxQueue))
			why += fmt.Sprintf("; the workers answer about %.0f samples/s (estimate), %d within the %s timeout, and a request waiting longer fails anyway", rate, byTime, FormatSeconds(s.TimeoutSeconds))
			q = min(q, max(byTime, mul(w, s.MaxBatch)))
		}
		s.Queue = max(q, 1)
		decide("queue", fmt.Sprint(s.Queue), why+"; past it the server answers 503 with Retry-After.")
	}
	s.Memory = sum(m.static.runtime, mul(w, static), mul(mul(w, s.MaxBatch), s.SampleBytes), mul(s.Queue, s.RequestBytes), mul(s.Decodes, s.DecodeBytes))
	if s.Precision == "int8" {
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
		decide("precision", "int8", why)
	} else {
		decide("precision", "fp32", "as trained.")
	}
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
