package serve

import (
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"
)

// decodeMemory keeps image decoding within the plan's decode memory
// (Decodes of DecodeBytes) and gives the memory back once decoding
// stops. Left to itself the collector (GOGC 100) lets garbage grow to as
// much as is live before it collects, and a decode leaves its whole
// image and the upload behind, so a burst of large images grew the heap
// to twice the bodies and decodes it held, and the heap kept that size
// until the next collection, minutes later when idle. Design:
// docs/design/serving.md, "Decode memory".
type decodeMemory struct {
	// waiting counts images waiting for a decode slot; held is the
	// decodeCost of the images being decoded; since is what decodes
	// have allocated (bodies and images) since memory was last returned.
	waiting atomic.Int64
	held    atomic.Int64
	since   atomic.Int64
	// collecting is held by the one decode that collects; the others
	// that find the heap over the bound wait for it and look again.
	collecting sync.Mutex
}

// room runs once a decode holds its slot, before it decodes an image of
// cost bytes. When what the heap allocated since its last collection
// and the images being decoded, this one with them, pass half the
// plan's decode memory, it collects first; the other half is for what
// the other slots allocate while it collects. So the heap grows by at
// most the plan's decode memory beside what is live. Small images
// rarely reach the bound, so they cost no collection.
func (s *Server) room(cost int64) {
	d := &s.decodeMem
	over := func() bool {
		return allocatedSinceGC()+d.held.Load() > int64(s.cfg.Decodes)*s.cfg.DecodeBytes/2
	}
	d.held.Add(cost)
	if !over() {
		return
	}
	d.collecting.Lock()
	defer d.collecting.Unlock()
	if over() {
		runtime.GC()
	}
}

// settle runs after a decode of cost bytes (and a body of body bytes)
// has given back its slot. When no image is decoding or waiting, and
// the decodes since memory was last returned allocated more than one
// decode's bytes, it collects and returns the memory to the OS, rather
// than keep it until the collector next runs (minutes, when idle).
func (s *Server) settle(cost, body int64) {
	d := &s.decodeMem
	d.held.Add(-cost)
	since := d.since.Add(cost + body)
	if len(s.decodes) > 0 || d.waiting.Load() > 0 || since <= s.cfg.DecodeBytes {
		return
	}
	if d.collecting.TryLock() {
		defer d.collecting.Unlock()
		d.since.Store(0)
		debug.FreeOSMemory()
	}
}

// allocatedSinceGC is the heap's objects beyond what its last collection
// found live: garbage, and what was allocated since.
func allocatedSinceGC() int64 {
	m := []rtmetrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	rtmetrics.Read(m)
	return max(int64(m[0].Value.Uint64())-int64(m[1].Value.Uint64()), 0)
}
