//go:build cgo

package geotiff

/*
#include <stddef.h>
#include <stdint.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

// pipe_lut_u16 sets dst[i] = lut[src[i]] for i < n. With SSE2 the stores
// bypass the cache (a batch is written once and read by the model much
// later, so bringing its lines in first is wasted traffic).
static void pipe_lut_u16(const uint16_t *src, float *dst, const float *lut, size_t n) {
	size_t i = 0;
#ifdef __SSE2__
	for (; i < n && ((uintptr_t)(dst + i) & 15) != 0; i++) dst[i] = lut[src[i]];
	for (; i + 8 <= n; i += 8) {
		__m128 a = _mm_set_ps(lut[src[i+3]], lut[src[i+2]], lut[src[i+1]], lut[src[i]]);
		__m128 b = _mm_set_ps(lut[src[i+7]], lut[src[i+6]], lut[src[i+5]], lut[src[i+4]]);
		_mm_stream_ps(dst + i, a);
		_mm_stream_ps(dst + i + 4, b);
	}
	_mm_sfence();
#endif
	for (; i < n; i++) dst[i] = lut[src[i]];
}
*/
import "C"

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/airbusgeo/godal"
)

// The fast path of a geotiff read: integer bands of 16 bits or fewer.
//
// readWindow asks GDAL for float32 and then, per pixel and band, checks
// nodata and normalises in float64: about as much time again as GDAL's
// own read of an uncompressed tile, and an allocation per tile. When
// every selected band is Byte or UInt16 and the window lies inside the
// raster, readFast asks GDAL for the file's own integers instead, into a
// buffer reused across reads (a sync.Pool, so each loader worker ends up
// with one), and maps each value through a per-band table made at Open:
// lut[k][v] = float32((float64(v) − mean_k) / std_k), the very expression
// readWindow evaluates, so the two give the same bits. Nodata is an
// integer compare on the raw values, made only for bands that have a
// nodata value an integer can hold; a tile without nodata and without a
// target skips validity altogether. Partial windows (a prediction's edge)
// and other types keep readWindow.
//
// GDAL reads only the window's blocks at full resolution: overviews are
// never used for a read that does not resample.

// fastStripValues bounds the raw buffer (8 MiB): a window needing more is
// read in strips of rows. One call per window measured faster than
// strips of 256 KiB kept in the core's cache (bench/cmd/tiles,
// uncompressed COG: 0.66 of raw GDAL against 0.50 to 0.66), since the
// tables' streaming stores do not need GDAL's output hot.
var fastStripValues = 4 << 20 // a variable so the tests can make strips of a few rows

// fastLUT is one band's table from raw value to normalised input.
type fastLUT [1 << 16]float32

// fastScratch is one reader's buffers.
type fastScratch struct {
	raw []uint16
	bad []bool
}

// prepareFast builds the tables when the selected bands allow the fast
// path; it must run after the normalisation is known.
func (d *Dataset) prepareFast(h *godal.Dataset) {
	all := h.Bands()
	for _, bn := range d.bands {
		switch all[bn-1].Structure().DataType {
		case godal.Byte, godal.UInt16:
		default:
			return
		}
	}
	d.lut = make([]*fastLUT, len(d.bands))
	d.ndRaw = make([]int32, len(d.bands))
	// One allocation for all bands' tables, so that C takes them as one
	// array (direct.go).
	tables := make([]fastLUT, len(d.bands))
	for k := range d.bands {
		t := &tables[k]
		for v := range t {
			f := float32(v)
			if d.norm.Mean != nil {
				f = float32((float64(f) - d.norm.Mean[k]) / d.norm.Std[k])
			}
			t[v] = f
		}
		d.lut[k] = t
		d.ndRaw[k] = -1
		if nd := d.nodata[k]; nd >= 0 && nd <= math.MaxUint16 && nd == math.Trunc(nd) {
			d.ndRaw[k] = int32(nd)
			d.anyND = true
		}
	}
	d.scratch = &sync.Pool{New: func() any { return new(fastScratch) }}
}

// readFast reads win through the tables; false when the fast path does
// not apply (and nothing was read).
func (d *Dataset) readFast(win Window, x, y, mask []float32) (bool, error) {
	if d.lut == nil || win.X < 0 || win.Y < 0 || win.X+win.W > d.grid.Width || win.Y+win.H > d.grid.Height || win.W <= 0 || win.H <= 0 {
		return false, nil
	}
	nb := len(d.bands)
	plane := win.W * win.H
	if len(x) < nb*plane {
		return true, fmt.Errorf("geotiff: x holds %d values, the window needs %d", len(x), nb*plane)
	}
	x = x[:nb*plane]
	s := d.scratch.Get().(*fastScratch)
	defer d.scratch.Put(s)
	var bad []bool
	if d.anyND || d.target != nil {
		if cap(s.bad) < plane {
			s.bad = make([]bool, plane)
		}
		bad = s.bad[:plane]
		clear(bad)
	}
	anyBad, handled := false, false
	if d.direct != nil {
		var err error
		if handled, anyBad, err = d.direct.read(d, win, x, bad); err != nil {
			return true, err
		}
	}
	if !handled {
		var err error
		if anyBad, err = d.readFastGDAL(win, x, bad, s); err != nil {
			return true, err
		}
	}
	if anyBad {
		for p, b := range bad {
			if b {
				for k := range nb {
					x[k*plane+p] = 0
				}
			}
		}
	}
	if d.target == nil {
		return true, nil
	}
	d.targetWindow(win, func(p int) bool { return !bad[p] }, y, mask)
	return true, nil
}

// readFastGDAL reads win through GDAL as the file's integers and maps
// them through the tables into x, marking nodata in bad; it says whether
// any pixel was.
func (d *Dataset) readFastGDAL(win Window, x []float32, bad []bool, s *fastScratch) (bool, error) {
	nb := len(d.bands)
	plane := win.W * win.H
	rows := max(1, min(win.H, fastStripValues/(nb*win.W)))
	if cap(s.raw) < nb*rows*win.W {
		s.raw = make([]uint16, nb*rows*win.W)
	}
	h, err := d.pool.get()
	if err != nil {
		return false, fmt.Errorf("%s: %w", d.path, err)
	}
	defer d.pool.put(h)
	anyBad := false
	for r0 := 0; r0 < win.H; r0 += rows {
		n := min(rows, win.H-r0)
		sp := n * win.W // one band's part of the strip
		raw := s.raw[:nb*sp]
		if err := h.Read(win.X, win.Y+r0, raw, win.W, n, godal.Bands(d.bands0...), godal.BandInterleaved()); err != nil {
			return false, fmt.Errorf("%s: reading the window at column %d, row %d (%dx%d): %v", d.path, win.X, win.Y, win.H, win.W, err)
		}
		off := r0 * win.W
		for k := range nb {
			src := raw[k*sp : (k+1)*sp]
			dst := x[k*plane+off : k*plane+off+sp]
			dst = dst[:len(src)]
			if len(src) > 0 {
				C.pipe_lut_u16((*C.uint16_t)(unsafe.Pointer(&src[0])), (*C.float)(unsafe.Pointer(&dst[0])), (*C.float)(unsafe.Pointer(&d.lut[k][0])), C.size_t(len(src)))
			}
			if nd := d.ndRaw[k]; nd >= 0 {
				v := uint16(nd)
				b := bad[off : off+sp]
				for i, r := range src {
					if r == v {
						b[i] = true
						anyBad = true
					}
				}
			}
		}
	}
	return anyBad, nil
}
