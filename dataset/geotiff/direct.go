//go:build cgo

package geotiff

/*
#cgo LDFLAGS: -ldeflate -lzstd
#cgo pkg-config: gdal
#include <gdal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <libdeflate.h>
#include <zstd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

// pipe_tiff_unpredict undoes TIFF predictor 2 (horizontal differencing)
// in place: in each of rows rows of n samples, sample i adds sample
// i - stride (modulo the sample's width), as libtiff's horAcc8/horAcc16.
static void pipe_tiff_unpredict(void *buf, int bytes, size_t rows, size_t n, size_t stride) {
	for (size_t r = 0; r < rows; r++) {
		if (bytes == 2) {
			uint16_t *q = (uint16_t *)buf + r * n;
			for (size_t i = stride; i < n; i++) q[i] = (uint16_t)(q[i] + q[i - stride]);
		} else {
			uint8_t *q = (uint8_t *)buf + r * n;
			for (size_t i = stride; i < n; i++) q[i] = (uint8_t)(q[i] + q[i - stride]);
		}
	}
}

// pipe_tiff_convert_T maps a rows × cols region of a decoded block into
// the caller's float32 window, de-interleaving and normalising in one
// pass: band k of the pixel at (r, c) is src[r*srcRow + c*pstride +
// samp[k]], and goes to dst[k*plane + r*dstRow + c] through its table
// luts[k<<16 ...]. Where the raw value is band k's nodata (nd[k] >= 0 and
// representable in T), bad[r*dstRow + c] is set; the result says whether
// any was. The stores bypass the cache, as pipe_lut_u16's do.
#ifdef __SSE2__
#define PIPE_STREAM(o, c, s, lut, pstride)                                              \
	for (; c + 4 <= cols; c += 4)                                                       \
		_mm_stream_ps(o + c, _mm_set_ps(lut[s[(c + 3) * pstride]], lut[s[(c + 2) * pstride]], \
		                                lut[s[(c + 1) * pstride]], lut[s[c * pstride]]));
#define PIPE_ALIGN(o, c) for (; c < cols && ((uintptr_t)(o + c) & 15) != 0; c++)
#define PIPE_FENCE() _mm_sfence()
#else
#define PIPE_STREAM(o, c, s, lut, pstride)
#define PIPE_ALIGN(o, c) for (; 0;)
#define PIPE_FENCE()
#endif

#define PIPE_CONVERT(T)                                                                     \
static int pipe_tiff_convert_##T(const T *src, size_t srcRow, size_t pstride, size_t rows, \
                                 size_t cols, int nsel, const int32_t *samp, float *dst,   \
                                 size_t plane, size_t dstRow, const float *luts,           \
                                 const int32_t *nd, uint8_t *bad) {                        \
	int any = 0;                                                                            \
	for (size_t r = 0; r < rows; r++) {                                                     \
		for (int k = 0; k < nsel; k++) {                                                    \
			const T *s = src + r * srcRow + samp[k];                                        \
			float *o = dst + (size_t)k * plane + r * dstRow;                                \
			const float *lut = luts + ((size_t)k << 16);                                    \
			size_t c = 0;                                                                   \
			PIPE_ALIGN(o, c) o[c] = lut[s[c * pstride]];                                    \
			PIPE_STREAM(o, c, s, lut, pstride)                                              \
			for (; c < cols; c++) o[c] = lut[s[c * pstride]];                               \
			if (nd[k] >= 0 && (int32_t)(T)nd[k] == nd[k]) {                                 \
				T v = (T)nd[k];                                                             \
				uint8_t *b = bad + r * dstRow;                                              \
				for (c = 0; c < cols; c++)                                                  \
					if (s[c * pstride] == v) {                                              \
						b[c] = 1;                                                           \
						any = 1;                                                            \
					}                                                                       \
			}                                                                               \
		}                                                                                   \
	}                                                                                       \
	PIPE_FENCE();                                                                           \
	return any;                                                                             \
}
PIPE_CONVERT(uint8_t)
PIPE_CONVERT(uint16_t)

// pipe_tiff_inflate decodes a zlib stream (TIFF's DEFLATE, tags 8 and
// 32946) of exactly want bytes: 0, or libdeflate's result, or -1 when the
// stream decoded to fewer bytes, -2 when no decompressor could be made.
static int pipe_tiff_inflate(struct libdeflate_decompressor **d, const void *in, size_t n, void *out, size_t want) {
	if (*d == NULL) *d = libdeflate_alloc_decompressor();
	if (*d == NULL) return -2;
	size_t got = 0;
	enum libdeflate_result r = libdeflate_zlib_decompress(*d, in, n, out, want, &got);
	if (r != LIBDEFLATE_SUCCESS) return (int)r;
	return got == want ? 0 : -1;
}

// pipe_tiff_unzstd decodes a ZSTD frame of exactly want bytes: NULL, or
// the reason it failed.
static const char *pipe_tiff_unzstd(ZSTD_DCtx **c, const void *in, size_t n, void *out, size_t want) {
	if (*c == NULL) *c = ZSTD_createDCtx();
	if (*c == NULL) return "no ZSTD context";
	size_t r = ZSTD_decompressDCtx(*c, out, want, in, n);
	if (ZSTD_isError(r)) return ZSTD_getErrorName(r);
	return r == want ? NULL : "the frame decoded to fewer bytes than the block holds";
}

static void pipe_tiff_free(struct libdeflate_decompressor *d, ZSTD_DCtx *c) {
	if (d != NULL) libdeflate_free_decompressor(d);
	if (c != NULL) ZSTD_freeDCtx(c);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/airbusgeo/godal"
)

// The direct block reader: the fast path's read of a window from a
// GeoTIFF's blocks, without GDAL in the loop.
//
// It makes GDAL's several passes over a window's bytes two (read and
// decompress a block, then one C pass that de-interleaves, checks nodata
// and normalises through the same tables, bit for bit GDAL's values), for
// the common layouts: the first IFD, 8- or 16-bit unsigned samples,
// uncompressed, DEFLATE or ZSTD tiles and strips. Everything else, and any
// file where GDAL disagrees with the IFD, stays on GDAL's path. It is by
// hand because GDAL 3.6 and the Go TIFF libraries offer no block-level read.
// Layouts, reasons and measurements: docs/design/geotiff-source.md.

// directTIFF turns the direct block reader on for datasets opened from
// now on; the tests turn it off to compare with GDAL's path.
var directTIFF = true

// directChunkBytes is how many bytes of an uncompressed block's rows one
// read takes, so that the conversion finds them in the core's cache.
var directChunkBytes = 256 << 10

// tiffDirect is one dataset's direct reader.
type tiffDirect struct {
	f     blockFile
	size  int64
	lay   *tiffLayout
	bytes int     // per sample
	samp  []int32 // per selected band: its sample in a pixel (chunky), 0 (separate)
	plane []int   // per selected band: its plane (separate), 0 (chunky)
	pix   int     // bytes of a pixel in a block row: spp·bytes (chunky), bytes (separate)
	zero  []int32 // samp for one band of a separate file
	luts  *float32

	cache *blockCache // decoded blocks of a compressed file, shared by the workers; nil when uncompressed

	mu   sync.Mutex
	free []*directScratch
	all  []*directScratch

	reads atomic.Int64 // windows read directly
}

// directScratch is one reader's buffers.
type directScratch struct {
	comp    []byte // a compressed block
	rows    []byte // rows of an uncompressed block
	pending []int  // strips left for later (readStrips)
	defl    *C.struct_libdeflate_decompressor
	zstd    *C.ZSTD_DCtx
}

// prepareDirect sets d.direct when the direct reader can read the file;
// it must run after prepareFast.
func (d *Dataset) prepareDirect(h *godal.Dataset) {
	if !directTIFF || d.lut == nil || !littleEndianHost() || h.Driver().ShortName() != "GTiff" {
		return
	}
	var f blockFile
	if d.obj != nil {
		f = d.obj
	} else {
		lf, err := os.Open(d.pool.path)
		if err != nil {
			return
		}
		f = localFile{lf}
	}
	t, err := newTIFFDirect(f, h, d.bands, d.th)
	if err != nil || t == nil {
		f.Close()
		return
	}
	t.luts = &d.lut[0][0]
	d.direct = t
	// The statistics pass left the file's blocks in GDAL's cache; the
	// direct reader does not use them (the GDAL path's windows, such as a
	// prediction's edges, open a handle again).
	d.pool.closeIdle()
}

func littleEndianHost() bool {
	v := uint16(1)
	return *(*byte)(unsafe.Pointer(&v)) == 1
}

// blockFile is what the direct reader reads blocks from: a local file, or
// a remote object (remote.Object, through its block cache).
type blockFile interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

type localFile struct{ *os.File }

func (f localFile) Size() int64 {
	fi, err := f.Stat()
	if err != nil {
		return -1
	}
	return fi.Size()
}

// newTIFFDirect returns nil when the layout is not one it reads.
func newTIFFDirect(f blockFile, h *godal.Dataset, bands []int, th int) (*tiffDirect, error) {
	size := f.Size()
	if size < 0 {
		return nil, nil
	}
	lay, err := readTIFFLayout(f, size)
	if err != nil {
		return nil, err
	}
	st := h.Structure()
	if lay.width != st.SizeX || lay.height != st.SizeY || lay.spp != st.NBands || lay.sampleFormat != 1 ||
		lay.fillOrder != 1 || lay.subfile != 0 || (lay.planar != 1 && lay.planar != 2) {
		return nil, nil
	}
	switch lay.photometric {
	case 1, 2, 3: // min-is-black, RGB, palette: GDAL returns the samples as they are
	default:
		return nil, nil
	}
	var typ godal.DataType
	switch lay.bits {
	case 8:
		typ = godal.Byte
	case 16:
		typ = godal.UInt16
	default:
		return nil, nil
	}
	switch lay.compression {
	case 1:
		if lay.predictor != 1 {
			return nil, nil
		}
	case 8, 32946, 50000:
		if lay.predictor != 1 && lay.predictor != 2 {
			return nil, nil
		}
	default:
		return nil, nil
	}
	for _, b := range h.Bands() {
		bs := b.Structure()
		if bs.DataType != typ || (lay.tiled && (bs.BlockSizeX != lay.bw || bs.BlockSizeY != lay.bh)) {
			return nil, nil
		}
	}
	t := &tiffDirect{f: f, size: size, lay: lay, bytes: lay.bits / 8, zero: []int32{0}}
	t.pix = t.bytes
	for _, bn := range bands {
		if lay.planar == 1 {
			t.samp = append(t.samp, int32(bn-1))
			t.plane = append(t.plane, 0)
		} else {
			t.samp = append(t.samp, 0)
			t.plane = append(t.plane, bn-1)
		}
	}
	if lay.planar == 1 {
		t.pix *= lay.spp
	}
	if lay.compression != 1 {
		t.cache = newBlockCache(t, th, bands)
		if t.cache == nil {
			return nil, nil
		}
	}
	return t, nil
}

func (t *tiffDirect) get() *directScratch {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.free); n > 0 {
		s := t.free[n-1]
		t.free = t.free[:n-1]
		return s
	}
	s := new(directScratch)
	t.all = append(t.all, s)
	return s
}

func (t *tiffDirect) put(s *directScratch) {
	t.mu.Lock()
	t.free = append(t.free, s)
	t.mu.Unlock()
}

// close frees the decompressors and closes the file; it must not race
// with readers, as handlePool.close.
func (t *tiffDirect) close() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.all {
		C.pipe_tiff_free(s.defl, s.zstd)
		s.defl, s.zstd = nil, nil
	}
	t.all, t.free = nil, nil
	return t.f.Close()
}

// rowBytes is the bytes of one row of a block.
func (t *tiffDirect) rowBytes() int { return t.lay.bw * t.pix }

// blockRows is how many rows block row by holds: a tile always its
// height, the last strip what is left.
func (t *tiffDirect) blockRows(by int) int {
	if t.lay.tiled {
		return t.lay.bh
	}
	return min(t.lay.bh, t.lay.height-by*t.lay.bh)
}

// read reads the window (inside the raster) into x, setting bad where a
// band holds its nodata; false when a block it needs is sparse (nothing
// was written then).
func (t *tiffDirect) read(d *Dataset, win Window, x []float32, bad []bool) (handled, anyBad bool, err error) {
	lay := t.lay
	bx0, bx1 := win.X/lay.bw, (win.X+win.W-1)/lay.bw
	by0, by1 := win.Y/lay.bh, (win.Y+win.H-1)/lay.bh
	planes := []int{0}
	if lay.planar == 2 {
		planes = t.plane
	}
	for _, p := range planes {
		for by := by0; by <= by1; by++ {
			for bx := bx0; bx <= bx1; bx++ {
				i := t.index(p, bx, by)
				if t.lay.offsets[i] == 0 || t.lay.counts[i] == 0 {
					return false, false, nil
				}
			}
		}
	}
	s := t.get()
	defer t.put(s)
	if t.cache != nil && !lay.tiled {
		if anyBad, err = t.readStrips(d, s, win, x, bad); err != nil {
			return true, false, err
		}
		t.reads.Add(1)
		return true, anyBad, nil
	}
	for by := by0; by <= by1; by++ {
		// The block rows' part of the window, in block coordinates.
		r0 := max(win.Y, by*lay.bh) - by*lay.bh
		r1 := min(win.Y+win.H, (by+1)*lay.bh) - by*lay.bh
		for bx := bx0; bx <= bx1; bx++ {
			c0 := max(win.X, bx*lay.bw) - bx*lay.bw
			c1 := min(win.X+win.W, (bx+1)*lay.bw) - bx*lay.bw
			out := (by*lay.bh+r0-win.Y)*win.W + bx*lay.bw + c0 - win.X // the region's first pixel in the window
			for k := range t.samp {
				if lay.planar == 1 && k > 0 {
					break // one block holds every band
				}
				i := t.index(t.plane[k], bx, by)
				// convert converts rows rows of the region from p (its
				// first column in a row of a block) and moves on.
				off := out
				convert := func(p []byte, rows int) {
					if t.convertBlock(d, p, rows, c0, c1, k, off, win, x, bad) {
						anyBad = true
					}
					off += rows * win.W
				}
				if lay.compression == 1 {
					err = t.readRows(s, i, bx, by, r0, r1, c0, c1, convert)
				} else {
					var e *cachedBlock
					if e, err = t.acquire(s, i, bx, by, true); err == nil {
						convert(e.data[r0*t.rowBytes()+c0*t.pix:], r1-r0)
						t.cache.release(e)
					}
				}
				if err != nil {
					return true, false, fmt.Errorf("%s: %w", d.path, err)
				}
			}
		}
	}
	t.reads.Add(1)
	return true, anyBad, nil
}

// convertBlock converts rows rows of columns c0 to c1 of a block, from
// src (the first of them in the block's first row to convert), for band
// k of a BAND-interleaved file or every band of a chunky one, into the
// window from its pixel off; it says whether a pixel was nodata.
func (t *tiffDirect) convertBlock(d *Dataset, src []byte, rows, c0, c1, k, off int, win Window, x []float32, bad []bool) bool {
	samp, nsel, base := t.samp, len(t.samp), 0
	luts := unsafe.Pointer(t.luts)
	nd := d.ndRaw
	plane := win.W * win.H
	if t.lay.planar == 2 {
		samp, nsel, base = t.zero, 1, k*plane
		luts = unsafe.Add(luts, k<<16*4)
		nd = d.ndRaw[k:]
	}
	var b []bool
	if bad != nil {
		b = bad[off:]
	}
	return t.convert(unsafe.Pointer(&src[0]), rows, c1-c0, nsel, samp, x[base+off:], plane, win.W, luts, nd, b)
}

// index is the block of plane p (0 for chunky files) at column bx, row by.
func (t *tiffDirect) index(p, bx, by int) int {
	return p*t.lay.nbx*t.lay.nby + by*t.lay.nbx + bx
}

// convert calls the C conversion for the sample width.
func (t *tiffDirect) convert(src unsafe.Pointer, rows, cols, nsel int, samp []int32, dst []float32, plane, dstRow int, luts unsafe.Pointer, nd []int32, bad []bool) bool {
	var b *C.uint8_t
	if bad != nil {
		b = (*C.uint8_t)(unsafe.Pointer(&bad[0]))
	}
	srcRow := C.size_t(t.rowBytes() / t.bytes)
	pstride := C.size_t(t.pix / t.bytes)
	sp := (*C.int32_t)(unsafe.Pointer(&samp[0]))
	ndp := (*C.int32_t)(unsafe.Pointer(&nd[0]))
	dp := (*C.float)(unsafe.Pointer(&dst[0]))
	lp := (*C.float)(luts)
	if t.bytes == 2 {
		return C.pipe_tiff_convert_uint16_t((*C.uint16_t)(src), srcRow, pstride, C.size_t(rows), C.size_t(cols), C.int(nsel), sp, dp, C.size_t(plane), C.size_t(dstRow), lp, ndp, b) != 0
	}
	return C.pipe_tiff_convert_uint8_t((*C.uint8_t)(src), srcRow, pstride, C.size_t(rows), C.size_t(cols), C.int(nsel), sp, dp, C.size_t(plane), C.size_t(dstRow), lp, ndp, b) != 0
}

// readRows reads rows r0 to r1 of uncompressed block i and converts
// columns c0 to c1 of each: whole rows of a tile, in chunks of
// directChunkBytes; only the window's columns of a strip (a row of a
// strip is the raster's width), one read a row.
func (t *tiffDirect) readRows(s *directScratch, i, bx, by, r0, r1, c0, c1 int, convert func(p []byte, rows int)) error {
	rb := t.rowBytes()
	if need := uint64(t.blockRows(by) * rb); t.lay.counts[i] < need {
		return t.blockErr(i, bx, by, fmt.Errorf("it holds %d bytes, an uncompressed block %d", t.lay.counts[i], need))
	}
	if !t.lay.tiled {
		n := (c1 - c0) * t.pix
		if cap(s.rows) < n {
			s.rows = make([]byte, n)
		}
		buf := s.rows[:n]
		for r := r0; r < r1; r++ {
			if err := t.readAt(buf, int64(t.lay.offsets[i])+int64(r*rb+c0*t.pix)); err != nil {
				return t.blockErr(i, bx, by, err)
			}
			convert(buf, 1)
		}
		return nil
	}
	chunk := max(1, min(r1-r0, directChunkBytes/rb))
	if cap(s.rows) < chunk*rb {
		s.rows = make([]byte, chunk*rb)
	}
	for r := r0; r < r1; r += chunk {
		n := min(chunk, r1-r)
		buf := s.rows[:n*rb]
		if err := t.readAt(buf, int64(t.lay.offsets[i])+int64(r*rb)); err != nil {
			return t.blockErr(i, bx, by, err)
		}
		convert(buf[c0*t.pix:], n)
	}
	return nil
}

// decodeInto reads compressed block i and decompresses it into buf,
// which holds exactly its decoded bytes, undoing the predictor.
func (t *tiffDirect) decodeInto(s *directScratch, i, bx, by int, buf []byte) error {
	want := len(buf)
	n := t.lay.counts[i]
	if n > uint64(t.size) {
		return t.blockErr(i, bx, by, fmt.Errorf("it claims %d bytes, more than the file's %d", n, t.size))
	}
	if cap(s.comp) < int(n) {
		s.comp = make([]byte, n)
	}
	comp := s.comp[:n]
	if err := t.readAt(comp, int64(t.lay.offsets[i])); err != nil {
		return t.blockErr(i, bx, by, err)
	}
	in, out := unsafe.Pointer(&comp[0]), unsafe.Pointer(&buf[0])
	switch t.lay.compression {
	case 50000:
		if msg := C.pipe_tiff_unzstd(&s.zstd, in, C.size_t(n), out, C.size_t(want)); msg != nil {
			return t.blockErr(i, bx, by, fmt.Errorf("ZSTD: %s", C.GoString(msg)))
		}
	default:
		if r := C.pipe_tiff_inflate(&s.defl, in, C.size_t(n), out, C.size_t(want)); r != 0 {
			return t.blockErr(i, bx, by, fmt.Errorf("DEFLATE: %s", inflateErr(int(r))))
		}
	}
	if t.lay.predictor == 2 {
		rb := t.rowBytes()
		C.pipe_tiff_unpredict(out, C.int(t.bytes), C.size_t(want/rb), C.size_t(rb/t.bytes), C.size_t(t.pix/t.bytes))
	}
	return nil
}

func inflateErr(r int) string {
	switch r {
	case -1:
		return "the stream decoded to fewer bytes than the block holds"
	case -2:
		return "no decompressor"
	case 1:
		return "bad data"
	case 2:
		return "the stream ended early"
	case 3:
		return "the stream decodes to more bytes than the block holds"
	}
	return fmt.Sprintf("error %d", r)
}

// readAt fills b from off; a short read is an error.
func (t *tiffDirect) readAt(b []byte, off int64) error {
	n, err := t.f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("%d bytes at byte %d: the file ends after %d (is it truncated?)", len(b), off, n)
	}
	return err
}

func (t *tiffDirect) blockErr(i, bx, by int, err error) error {
	kind := "tile"
	if !t.lay.tiled {
		kind = "strip"
	}
	return fmt.Errorf("%s %d (column %d, row %d of blocks) at byte %d: %w", kind, i, bx, by, t.lay.offsets[i], err)
}
