//go:build cgo

package geotiff

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// tiffLayout is where the blocks of a TIFF's first image (its first IFD:
// the full resolution in a GeoTIFF or a COG; overviews and masks follow
// it) lie in the file, and how they are encoded: what the direct block
// reader (direct.go) needs, and nothing else.
type tiffLayout struct {
	width, height int
	spp           int // samples per pixel (bands)
	bits          int // bits per sample: 8 or 16
	sampleFormat  int // 1 unsigned
	compression   int // 1 none, 8 or 32946 deflate, 50000 zstd, others as in the file
	predictor     int // 1 none, 2 horizontal differencing
	planar        int // 1 chunky (PIXEL interleave), 2 separate (BAND)
	photometric   int // -1 when absent
	fillOrder     int
	subfile       int // NewSubfileType
	tiled         bool
	bw, bh        int // block size: the tile, or the full width × rows per strip
	nbx, nby      int // blocks across and down (per band with planar 2)
	offsets       []uint64
	counts        []uint64
}

// TIFF tags the layout reads.
const (
	tagNewSubfileType  = 254
	tagImageWidth      = 256
	tagImageLength     = 257
	tagBitsPerSample   = 258
	tagCompression     = 259
	tagPhotometric     = 262
	tagFillOrder       = 266
	tagStripOffsets    = 273
	tagSamplesPerPixel = 277
	tagRowsPerStrip    = 278
	tagStripByteCounts = 279
	tagPlanarConfig    = 284
	tagPredictor       = 317
	tagTileWidth       = 322
	tagTileLength      = 323
	tagTileOffsets     = 324
	tagTileByteCounts  = 325
	tagSampleFormat    = 339
)

// errTIFFLayout says a file is not one the direct reader parses (big
// endian, not a TIFF); the GDAL path reads it.
var errTIFFLayout = errors.New("not a little-endian TIFF")

// readTIFFLayout parses the header and the first IFD of a classic or
// BigTIFF little-endian file. It checks only what it reads; whether the
// direct reader can use the result is direct.go's decision.
func readTIFFLayout(r io.ReaderAt, size int64) (*tiffLayout, error) {
	le := binary.LittleEndian
	var hdr [16]byte
	if _, err := r.ReadAt(hdr[:8], 0); err != nil {
		return nil, fmt.Errorf("reading the TIFF header: %w", err)
	}
	if hdr[0] != 'I' || hdr[1] != 'I' {
		return nil, errTIFFLayout
	}
	big := false
	var ifd uint64
	switch le.Uint16(hdr[2:]) {
	case 42:
		ifd = uint64(le.Uint32(hdr[4:]))
	case 43:
		if _, err := r.ReadAt(hdr[:16], 0); err != nil {
			return nil, fmt.Errorf("reading the BigTIFF header: %w", err)
		}
		if le.Uint16(hdr[4:]) != 8 || le.Uint16(hdr[6:]) != 0 {
			return nil, errors.New("a BigTIFF header with offsets of other than 8 bytes")
		}
		big = true
		ifd = le.Uint64(hdr[8:])
	default:
		return nil, errTIFFLayout
	}
	// The entries.
	entrySize, countSize, inline := 12, 2, 4
	if big {
		entrySize, countSize, inline = 20, 8, 8
	}
	if ifd == 0 || int64(ifd) >= size {
		return nil, fmt.Errorf("the first IFD's offset %d is outside the file (%d bytes)", ifd, size)
	}
	var cb [8]byte
	if _, err := r.ReadAt(cb[:countSize], int64(ifd)); err != nil {
		return nil, fmt.Errorf("reading the first IFD: %w", err)
	}
	var n uint64
	if big {
		n = le.Uint64(cb[:])
	} else {
		n = uint64(le.Uint16(cb[:]))
	}
	if n == 0 || n > 4096 {
		return nil, fmt.Errorf("the first IFD has %d entries", n)
	}
	ents := make([]byte, int(n)*entrySize)
	if _, err := r.ReadAt(ents, int64(ifd)+int64(countSize)); err != nil {
		return nil, fmt.Errorf("reading the first IFD's %d entries: %w", n, err)
	}
	// values reads an entry's integers (BYTE, SHORT, LONG, LONG8, IFD,
	// IFD8), inline or at their offset.
	values := func(e []byte) ([]uint64, error) {
		typ := le.Uint16(e[2:])
		var cnt uint64
		var val []byte
		if big {
			cnt, val = le.Uint64(e[4:]), e[12:20]
		} else {
			cnt, val = uint64(le.Uint32(e[4:])), e[8:12]
		}
		var sz int
		switch typ {
		case 1: // BYTE
			sz = 1
		case 3: // SHORT
			sz = 2
		case 4, 13: // LONG, IFD
			sz = 4
		case 16, 18: // LONG8, IFD8
			sz = 8
		default:
			return nil, fmt.Errorf("tag %d has type %d, not an integer", le.Uint16(e), typ)
		}
		if cnt > uint64(size)/uint64(sz) {
			return nil, fmt.Errorf("tag %d counts %d values, more than the file holds", le.Uint16(e), cnt)
		}
		b := val
		if tot := int(cnt) * sz; tot > inline {
			var off uint64
			if big {
				off = le.Uint64(val)
			} else {
				off = uint64(le.Uint32(val))
			}
			b = make([]byte, tot)
			if _, err := r.ReadAt(b, int64(off)); err != nil {
				return nil, fmt.Errorf("reading tag %d's %d values at %d: %w", le.Uint16(e), cnt, off, err)
			}
		}
		out := make([]uint64, cnt)
		for i := range out {
			switch sz {
			case 1:
				out[i] = uint64(b[i])
			case 2:
				out[i] = uint64(le.Uint16(b[2*i:]))
			case 4:
				out[i] = uint64(le.Uint32(b[4*i:]))
			case 8:
				out[i] = le.Uint64(b[8*i:])
			}
		}
		return out, nil
	}
	t := &tiffLayout{spp: 1, bits: 1, sampleFormat: 1, compression: 1, predictor: 1, planar: 1, photometric: -1, fillOrder: 1}
	one := map[uint16]*int{
		tagNewSubfileType: &t.subfile, tagImageWidth: &t.width, tagImageLength: &t.height,
		tagCompression: &t.compression, tagPhotometric: &t.photometric, tagFillOrder: &t.fillOrder,
		tagSamplesPerPixel: &t.spp, tagPlanarConfig: &t.planar, tagPredictor: &t.predictor,
		tagTileWidth: &t.bw, tagTileLength: &t.bh,
	}
	rowsPerStrip := -1
	var stripOff, stripCnt, tileOff, tileCnt []uint64
	for i := range int(n) {
		e := ents[i*entrySize : (i+1)*entrySize]
		tag := le.Uint16(e)
		switch tag {
		case tagNewSubfileType, tagImageWidth, tagImageLength, tagCompression, tagPhotometric, tagFillOrder,
			tagSamplesPerPixel, tagPlanarConfig, tagPredictor, tagTileWidth, tagTileLength, tagRowsPerStrip:
			v, err := values(e)
			if err != nil {
				return nil, err
			}
			if len(v) != 1 || v[0] > 1<<31 {
				return nil, fmt.Errorf("tag %d holds %v, want one value", tag, v)
			}
			if tag == tagRowsPerStrip {
				rowsPerStrip = int(v[0])
			} else {
				*one[tag] = int(v[0])
			}
		case tagBitsPerSample, tagSampleFormat:
			v, err := values(e)
			if err != nil {
				return nil, err
			}
			if len(v) == 0 {
				return nil, fmt.Errorf("tag %d holds no value", tag)
			}
			for _, b := range v[1:] {
				if b != v[0] {
					return nil, fmt.Errorf("tag %d differs between samples (%v)", tag, v)
				}
			}
			if tag == tagBitsPerSample {
				t.bits = int(v[0])
			} else {
				t.sampleFormat = int(v[0])
			}
		case tagStripOffsets, tagStripByteCounts, tagTileOffsets, tagTileByteCounts:
			v, err := values(e)
			if err != nil {
				return nil, err
			}
			switch tag {
			case tagStripOffsets:
				stripOff = v
			case tagStripByteCounts:
				stripCnt = v
			case tagTileOffsets:
				tileOff = v
			case tagTileByteCounts:
				tileCnt = v
			}
		}
	}
	if t.width <= 0 || t.height <= 0 || t.spp <= 0 {
		return nil, fmt.Errorf("an image of %dx%d with %d samples a pixel", t.width, t.height, t.spp)
	}
	switch {
	case tileOff != nil:
		t.tiled = true
		t.offsets, t.counts = tileOff, tileCnt
		if t.bw <= 0 || t.bh <= 0 {
			return nil, fmt.Errorf("tiles of %dx%d", t.bw, t.bh)
		}
	case stripOff != nil:
		t.offsets, t.counts = stripOff, stripCnt
		t.bw, t.bh = t.width, rowsPerStrip
		if rowsPerStrip <= 0 || rowsPerStrip > t.height {
			t.bh = t.height
		}
	default:
		return nil, errors.New("neither tile nor strip offsets")
	}
	t.nbx, t.nby = (t.width+t.bw-1)/t.bw, (t.height+t.bh-1)/t.bh
	want := t.nbx * t.nby
	if t.planar == 2 {
		want *= t.spp
	}
	if len(t.offsets) != want || len(t.counts) != want {
		return nil, fmt.Errorf("%d block offsets and %d byte counts for %d blocks", len(t.offsets), len(t.counts), want)
	}
	return t, nil
}
