//go:build cgo

package geotiff

// #cgo pkg-config: gdal
// #include <gdal.h>
import "C"

import (
	"fmt"
	"sync"
)

// The direct reader's cache of decoded blocks.
//
// One cache per dataset, shared by the loader's workers as GDAL's block
// cache is: first in, first out, decoded outside the lock, buffers reused
// once their last reader releases them. Its budget is GDAL's, and no more
// than the file's decoded bytes, so a file that fits is decoded once for
// all epochs; striped files get at least two rows of windows of strips.
// Details: docs/design/geotiff-source.md (the last section).

// directCacheBytes is the block cache's budget; negative: GDAL's cache
// size (GDALGetCacheMax64).
var directCacheBytes = -1

// directStripBytes bounds the two rows of windows of strips a striped
// file's cache must hold: a file whose windows need more keeps GDAL's
// path.
var directStripBytes = 256 << 20

// blockCache is one dataset's cache of decoded blocks.
type blockCache struct {
	mu   sync.Mutex
	cond sync.Cond
	ents []*cachedBlock // by block; nil when not cached
	fifo []*cachedBlock // circular, in the order decoded
	head int
	n    int
	held int // bytes of the blocks in fifo
	max  int
	bufs [][]byte       // buffers of evicted blocks, to reuse
	free []*cachedBlock // entries to reuse
}

// cachedBlock is one decoded block, its predictor undone.
type cachedBlock struct {
	block int
	size  int // bytes decoded
	data  []byte
	err   error
	done  bool // decoded (or failed: err)
	refs  int  // readers holding it
	gone  bool // evicted: recycled at refs 0
}

// newBlockCache makes t's cache for windows of th rows; nil when a
// striped file's would need more than directStripBytes.
func newBlockCache(t *tiffDirect, th int, bands []int) *blockCache {
	lay := t.lay
	planes := 1
	if lay.planar == 2 {
		planes = len(bands)
	}
	row := lay.nbx * lay.bw * t.pix * planes // bytes of a row of blocks' pixels
	least := 2 * (th + lay.bh) * row
	if !lay.tiled && least > directStripBytes {
		return nil
	}
	if lay.tiled {
		least = 4 * lay.bh * lay.bw * t.pix // a few tiles
	}
	budget := directCacheBytes
	if budget < 0 {
		budget = int(C.GDALGetCacheMax64())
	}
	budget = min(budget, lay.nby*lay.bh*row)
	c := &blockCache{ents: make([]*cachedBlock, len(lay.offsets)), fifo: make([]*cachedBlock, len(lay.offsets)), max: max(least, budget)}
	c.cond.L = &c.mu
	return c
}

// acquire returns block i (at column bx, row by) decoded, by this
// worker or another; the caller releases it when done reading. A block
// that failed to decode keeps its error while it is cached. Without
// wait, a block another worker is decoding gives nil and no error: the
// caller reads another strip of its window meanwhile and comes back, so
// that two workers on one row of tiles decode its strips side by side
// rather than one waiting on the other.
func (t *tiffDirect) acquire(s *directScratch, i, bx, by int, wait bool) (*cachedBlock, error) {
	c := t.cache
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
		c.ents[old.block] = nil
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
	var e *cachedBlock
	if k := len(c.free); k > 0 {
		e = c.free[k-1]
		c.free = c.free[:k-1]
	} else {
		e = new(cachedBlock)
	}
	*e = cachedBlock{block: i, size: want, refs: 1}
	c.held += want
	c.ents[i] = e
	c.fifo[(c.head+c.n)%len(c.fifo)] = e
	c.n++
	c.mu.Unlock()

	if buf == nil {
		buf = make([]byte, want)
	}
	err := t.decodeInto(s, i, bx, by, buf)

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
func (c *blockCache) release(e *cachedBlock) {
	c.mu.Lock()
	e.refs--
	if e.refs == 0 && e.gone {
		c.recycle(e)
	}
	c.mu.Unlock()
}

// recycle keeps an evicted entry's buffer and the entry for reuse; mu is
// held.
func (c *blockCache) recycle(e *cachedBlock) {
	if e.data != nil {
		c.bufs = append(c.bufs, e.data)
	}
	*e = cachedBlock{}
	c.free = append(c.free, e)
}

// readStrips reads the window from compressed strips through the cache,
// those another worker is decoding last.
func (t *tiffDirect) readStrips(d *Dataset, s *directScratch, win Window, x []float32, bad []bool) (anyBad bool, err error) {
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
		e, err := t.acquire(s, i, 0, by, wait)
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
		t.cache.release(e)
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
