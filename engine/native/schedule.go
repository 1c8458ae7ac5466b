package native

// Working memory
//
// A step is a fixed list of events (forward of every unit, loss, backward
// in reverse order, each checkpoint segment recomputed before its
// backward), and every tensor an event touches is a virtual buffer with a
// lifetime, its first and last events. The buffers are packed into one
// arena by offset (greedy by size, first fit), allocated once at Build, so
// nothing is allocated while training. A recomputed segment's first copies
// die early: that is the whole saving of checkpointing, and what the
// planner's cost model counts.
//
// Derivation: docs/design/native-memory.md.

import (
	"sort"
)

// vbuf is a virtual buffer: a size in float32 words and a lifetime in
// events, then an offset in the arena.
type vbuf struct {
	perSample, fixed int
	first, last      int
	off              int
	saved            bool // an activation or kept buffer (not a gradient or temporary)
}

func (b *vbuf) size(batch int) int { return b.perSample*batch + b.fixed }

func (b *vbuf) touch(t int) {
	if b.first < 0 || t < b.first {
		b.first = t
	}
	if t > b.last {
		b.last = t
	}
}

// align keeps every buffer on a 64-byte boundary.
const align = 16

func roundUp(n int) int { return (n + align - 1) / align * align }

// pack assigns offsets to the buffers that were touched and returns the
// arena size in words. Buffers never touched get offset -1.
func pack(bufs []*vbuf, batch int) int {
	order := make([]*vbuf, 0, len(bufs))
	for _, b := range bufs {
		b.off = -1
		if b.first >= 0 && b.size(batch) > 0 {
			order = append(order, b)
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		si, sj := order[i].size(batch), order[j].size(batch)
		if si != sj {
			return si > sj
		}
		return order[i].first < order[j].first
	})
	var placed []*vbuf
	total := 0
	for _, b := range order {
		sz := roundUp(b.size(batch))
		// The placed buffers that overlap b in time, by offset.
		var clash []*vbuf
		for _, p := range placed {
			if p.first <= b.last && b.first <= p.last {
				clash = append(clash, p)
			}
		}
		sort.Slice(clash, func(i, j int) bool { return clash[i].off < clash[j].off })
		off := 0
		for _, p := range clash {
			if p.off-off >= sz {
				break
			}
			if end := p.off + roundUp(p.size(batch)); end > off {
				off = end
			}
		}
		b.off = off
		if off+sz > total {
			total = off + sz
		}
		placed = append(placed, b)
	}
	return total
}

// peakLive returns the largest sum of the sizes of the buffers alive at one
// event, over events [0, nEvents), and the sum of the saved buffers alive
// at event at.
func peakLive(bufs []*vbuf, batch, nEvents, at int) (peak, saved int) {
	delta := make([]int, nEvents+1)
	for _, b := range bufs {
		if b.first < 0 {
			continue
		}
		s := b.size(batch)
		delta[b.first] += s
		delta[b.last+1] -= s
		if b.saved && b.first <= at && at <= b.last {
			saved += s
		}
	}
	live := 0
	for t := 0; t < nEvents; t++ {
		live += delta[t]
		if live > peak {
			peak = live
		}
	}
	return peak, saved
}
