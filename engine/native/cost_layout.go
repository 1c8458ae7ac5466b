package native

import "pipe/planner/cost"

// The cost model's layout of a step: buffers with lifetimes over the
// step's events, as buildTrain and buildEval make them (schedule.go), and
// the peak of the buffers alive at one event.

// costBuf is one buffer of the step: words and a lifetime in events.
type costBuf struct {
	words
	first, last int
	saved       bool
}

func (b *costBuf) touch(t int) {
	if b == nil {
		return
	}
	if b.first < 0 || t < b.first {
		b.first = t
	}
	if t > b.last {
		b.last = t
	}
}

// costLayout is a step's buffers and events.
type costLayout struct {
	bufs []*costBuf
	t    int
}

func (l *costLayout) buf(w words, saved bool) *costBuf {
	b := &costBuf{words: w, first: -1, last: -1, saved: saved}
	l.bufs = append(l.bufs, b)
	return b
}

func (l *costLayout) temps(ws []words) []*costBuf {
	out := make([]*costBuf, len(ws))
	for i, w := range ws {
		out[i] = l.buf(w, false)
		out[i].touch(l.t)
	}
	return out
}

func touchCost(bs []*costBuf, t int) {
	for _, b := range bs {
		b.touch(t)
	}
}

// Train implements cost.Arena: the training step with the checkpoint
// segments segs, laid out event by event as buildTrain does.
func (a *costArena) Train(segs []cost.Segment) cost.Step {
	units := a.units
	nu := len(units)
	// seg[i] is the segment that holds all of unit i's nodes, or -1;
	// members[s] are segment s's units in order.
	seg := make([]int, nu)
	members := make([][]int, len(segs))
	var nodeSeg []int // by node ID, -1 outside every segment
	for si, s := range segs {
		for len(nodeSeg) <= s.To {
			nodeSeg = append(nodeSeg, -1)
		}
		for id := s.From; id <= s.To; id++ {
			nodeSeg[id] = si
		}
	}
	segOf := func(id int) int {
		if id < len(nodeSeg) {
			return nodeSeg[id]
		}
		return -1
	}
	for i, u := range units {
		seg[i] = -1
		if i == 0 {
			continue
		}
		si := segOf(u.nodes[0].ID)
		ok := si >= 0
		for _, nd := range u.nodes[1:] {
			ok = ok && segOf(nd.ID) == si
		}
		if ok {
			seg[i] = si
			members[si] = append(members[si], i)
		}
	}
	l := &costLayout{}
	actF, actR := make([]*costBuf, nu), make([]*costBuf, nu)
	auxF, auxR := make([][]*costBuf, nu), make([][]*costBuf, nu)
	grad := make([]*costBuf, nu)
	for i, u := range units {
		actF[i] = l.buf(words{per: u.out}, true)
		for _, w := range u.aux {
			auxF[i] = append(auxF[i], l.buf(w, true))
		}
		if seg[i] >= 0 {
			actR[i] = l.buf(words{per: u.out}, true)
			for _, w := range u.aux {
				auxR[i] = append(auxR[i], l.buf(w, true))
			}
		}
		if u.reqGrad {
			grad[i] = l.buf(words{per: u.out}, false)
		}
	}
	actOf := func(j, i int) *costBuf {
		if seg[j] >= 0 && seg[j] == seg[i] {
			return actR[j]
		}
		return actF[j]
	}
	for i, u := range units {
		for _, j := range u.ins {
			actF[j].touch(l.t)
		}
		touchCost(auxF[i], l.t)
		l.temps(u.tmpF)
		actF[i].touch(l.t)
		l.t++
	}
	lossAt := l.t
	actF[a.outUnit].touch(lossAt)
	seedUnit := a.outUnit
	if a.through {
		seedUnit = units[a.outUnit].ins[0]
		actF[seedUnit].touch(lossAt)
	}
	written := make([]bool, nu)
	if units[seedUnit].reqGrad {
		grad[seedUnit].touch(lossAt)
		written[seedUnit] = true
	}
	l.t++
	done := make([]bool, len(segs))
	for i := nu - 1; i >= 1; i-- {
		u := units[i]
		if !u.reqGrad || u.skipBwd || !written[i] {
			continue
		}
		if seg[i] >= 0 && !done[seg[i]] {
			done[seg[i]] = true
			for _, v := range members[seg[i]] {
				vu := units[v]
				for _, j := range vu.ins {
					actOf(j, v).touch(l.t)
				}
				touchCost(auxR[v], l.t)
				l.temps(vu.tmpF)
				actR[v].touch(l.t)
				l.t++
			}
		}
		for k, j := range u.ins {
			if u.saveIn[k] {
				actOf(j, i).touch(l.t)
			}
			if u.needDin[k] {
				grad[j].touch(l.t)
				written[j] = true
			}
		}
		if u.saveOut {
			actOf(i, i).touch(l.t)
		}
		if seg[i] >= 0 {
			touchCost(auxR[i], l.t)
		} else {
			touchCost(auxF[i], l.t)
		}
		l.temps(u.tmpB)
		grad[i].touch(l.t)
		l.t++
	}
	peak, _ := l.peak()
	var s cost.Step
	s.Peak = cost.Mul(peak, 4)
	for _, b := range l.bufs {
		if b.saved && b.first >= 0 && b.first <= lossAt && lossAt <= b.last {
			s.Saved = cost.Add(s.Saved, cost.Mul(b.per, 4))
		}
	}
	if b := actF[0]; b.first >= 0 && b.last >= lossAt {
		s.Input = cost.Mul(b.per, 4)
	}
	return s
}

// Eval implements cost.Arena: the evaluation forward laid out as
// buildEval does.
func (a *costArena) Eval() (perSample, fixed int64) {
	l := &costLayout{}
	act := make([]*costBuf, len(a.units))
	for i, u := range a.units {
		act[i] = l.buf(words{per: u.out}, true)
	}
	for i, u := range a.units {
		for _, j := range u.ins {
			act[j].touch(l.t)
		}
		l.temps(u.aux)
		l.temps(u.tmpF)
		act[i].touch(l.t)
		l.t++
	}
	act[a.outUnit].touch(l.t)
	if a.through {
		act[a.units[a.outUnit].ins[0]].touch(l.t)
	}
	l.t++
	p, f := l.peak()
	return cost.Mul(p, 4), cost.Mul(f, 4)
}

// Fixed implements cost.Arena: the per-channel buffers the kernels keep.
func (a *costArena) Fixed() int64 {
	var f int64
	for _, u := range a.units {
		for _, w := range u.aux {
			f = cost.Add(f, cost.Mul(w.fixed, 4))
		}
	}
	return f
}

// State implements cost.Arena: the batchnorms' running statistics (2 per
// channel) and Panther's fixed sketches (Node.Buffers).
func (a *costArena) State() int64 {
	var n int64
	for _, u := range a.units {
		for _, nd := range u.nodes {
			if nd.Op == "batchnorm" && len(nd.Out) > 0 {
				n = cost.Add(n, cost.Mul(2, nd.Out[0]))
			}
			n = cost.Add(n, nd.Buffers)
		}
	}
	return cost.Mul(n, 4)
}

// Scratch implements cost.Arena: each worker's largest column buffer and,
// with more than one worker, partial weight gradient (allocScratch).
func (a *costArena) Scratch() int64 {
	var col, part int64
	for _, u := range a.units {
		col, part = max(col, u.col), max(part, u.part)
	}
	if a.threads == 1 {
		part = 0
	}
	return cost.Mul(int64(a.threads), cost.Mul(cost.Add(col, part), 4))
}

// peak returns the largest sum of the per-sample words of the buffers
// alive at one event, and the fixed words alive then.
func (l *costLayout) peak() (per, fixed int64) {
	dp := make([]int64, l.t+1)
	df := make([]int64, l.t+1)
	for _, b := range l.bufs {
		if b.first < 0 {
			continue
		}
		dp[b.first] += b.per
		dp[b.last+1] -= b.per
		df[b.first] += b.fixed
		df[b.last+1] -= b.fixed
	}
	var lp, lf int64
	for t := 0; t < l.t; t++ {
		lp += dp[t]
		lf += df[t]
		if lp > per || lp == per && lf > fixed {
			per, fixed = lp, lf
		}
	}
	return per, fixed
}
