//go:build cgo

package data

import (
	"fmt"
	"sync"
)

// The direct reader's cache of compressed strips.
//
// A strip is the raster's full width, so the windows of one row of tiles
// all need the same strips: a GeoTIFF that GDAL writes with its default
// strips (one row each, for a wide 12-band raster) has a window of 512
// rows touching 512 strips, each of which decodes to the raster's whole
// width. Decoding a strip for each window that needs it would decode
// each once per column of tiles; a cache per worker would decode each
// once per worker. So the strips are cached per dataset and shared by
// the workers, as GDAL's block cache does: a strip is decoded by the
// first worker that needs it (outside the lock: the others that need it
// meanwhile wait for it), kept while it is among the most recently
// decoded (first in, first out, up to a byte bound that holds two rows
// of tiles), and its buffer is reused once the last reader releases it.
// The lock guards only the bookkeeping: a lookup, a reference count.

// directStripBytes bounds the shared strip cache: a file whose windows
// need more (two rows of tiles of decoded strips) keeps GDAL's path.
var directStripBytes = 256 << 20

// stripCache is one dataset's cache of decoded strips.
type stripCache struct {
	mu   sync.Mutex
	cond sync.Cond
	ents []*stripEnt // by strip; nil when not cached
	fifo []*stripEnt // circular, in the order decoded
	head int
	n    int
	held int // bytes of the strips in fifo
	max  int
	bufs [][]byte    // buffers of evicted strips, to reuse
	free []*stripEnt // entries to reuse
}

// stripEnt is one decoded strip.
type stripEnt struct {
	strip int
	size  int // bytes decoded
	data  []byte
	err   error
	done  bool // decoded (or failed: err)
	refs  int  // readers holding it
	gone  bool // evicted: recycled at refs 0
}

func newStripCache(strips, max int) *stripCache {
	c := &stripCache{ents: make([]*stripEnt, strips), fifo: make([]*stripEnt, strips), max: max}
	c.cond.L = &c.mu
	return c
}

// acquire returns strip i decoded (by this worker or another); the
// caller releases it when done reading. A strip that failed to decode
// keeps its error while it is cached. Without wait, a strip another
// worker is decoding gives nil and no error: the caller reads another
// strip of its window meanwhile and comes back, so that two workers on
// one row of tiles decode its strips side by side rather than one
// waiting on the other.
func (t *tiffDirect) acquire(s *directScratch, i, by int, wait bool) (*stripEnt, error) {
	c := t.strips
	c.mu.Lock()
	if e := c.ents[i]; e != nil {
		if !e.done && !wait {
			c.mu.Unlock()
			return nil, nil
		}
		e.refs++
		for !e.done {
			c.cond.Wait()
		}
		err := e.err
		c.mu.Unlock()
		if err != nil {
			c.release(e)
			return nil, err
		}
		return e, nil
	}
	want := t.blockRows(by) * t.rowBytes()
	for c.n > 0 && c.held+want > c.max {
		old := c.fifo[c.head]
		c.fifo[c.head] = nil
		c.head = (c.head + 1) % len(c.fifo)
		c.n--
		c.held -= old.size
		c.ents[old.strip] = nil
		old.gone = true
		if old.refs == 0 {
			c.recycle(old)
		}
	}
	var buf []byte
	for j, b := range c.bufs {
		if cap(b) >= want {
			buf = b[:want]
			c.bufs[j] = c.bufs[len(c.bufs)-1]
			c.bufs = c.bufs[:len(c.bufs)-1]
			break
		}
	}
	var e *stripEnt
	if k := len(c.free); k > 0 {
		e = c.free[k-1]
		c.free = c.free[:k-1]
	} else {
		e = new(stripEnt)
	}
	*e = stripEnt{strip: i, size: want, refs: 1}
	c.held += want
	c.ents[i] = e
	c.fifo[(c.head+c.n)%len(c.fifo)] = e
	c.n++
	c.mu.Unlock()

	if buf == nil {
		buf = make([]byte, want)
	}
	err := t.decodeInto(s, i, 0, by, buf)

	c.mu.Lock()
	e.data, e.err, e.done = buf, err, true
	c.cond.Broadcast()
	c.mu.Unlock()
	if err != nil {
		c.release(e)
		return nil, err
	}
	return e, nil
}

// release gives back a strip acquire returned.
func (c *stripCache) release(e *stripEnt) {
	c.mu.Lock()
	e.refs--
	if e.refs == 0 && e.gone {
		c.recycle(e)
	}
	c.mu.Unlock()
}

// recycle keeps an evicted entry's buffer and the entry for reuse; mu is
// held.
func (c *stripCache) recycle(e *stripEnt) {
	if e.data != nil {
		c.bufs = append(c.bufs, e.data)
	}
	*e = stripEnt{}
	c.free = append(c.free, e)
}

// readStrips reads the window from compressed strips through the cache,
// those another worker is decoding last.
func (t *tiffDirect) readStrips(d *geotiffDataset, s *directScratch, win Window, x []float32, bad []bool) (anyBad bool, err error) {
	lay := t.lay
	nk := 1 // blocks a row of strips: one, or one a band read (BAND interleave)
	if lay.planar == 2 {
		nk = len(t.samp)
	}
	// one converts strip row by of band k (0 when chunky) into the
	// window; false when it is another worker's to decode and wait is
	// false.
	one := func(by, k int, wait bool) (bool, error) {
		i := t.index(t.plane[k], 0, by)
		e, err := t.acquire(s, i, by, wait)
		if err != nil {
			return false, fmt.Errorf("%s: %w", d.path, err)
		}
		if e == nil {
			return false, nil
		}
		r0 := max(win.Y, by*lay.bh) - by*lay.bh
		r1 := min(win.Y+win.H, (by+1)*lay.bh) - by*lay.bh
		if t.convertBlock(d, e.data[r0*t.rowBytes()+win.X*t.pix:], r1-r0, 0, win.W, k, (by*lay.bh+r0-win.Y)*win.W, win, x, bad) {
			anyBad = true
		}
		t.strips.release(e)
		return true, nil
	}
	s.pending = s.pending[:0]
	for by := win.Y / lay.bh; by <= (win.Y+win.H-1)/lay.bh; by++ {
		for k := range nk {
			ok, err := one(by, k, false)
			if err != nil {
				return false, err
			}
			if !ok {
				s.pending = append(s.pending, by*nk+k)
			}
		}
	}
	for _, p := range s.pending {
		if _, err := one(p/nk, p%nk, true); err != nil {
			return false, err
		}
	}
	return anyBad, nil
}
