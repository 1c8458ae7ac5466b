package dataset

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"

	"pipe/dataset/remote"
)

// Zarr v2 arrays (zarr-specification v2): a folder holding .zarray, a
// JSON header with the array's shape, its chunks' shape, dtype,
// compressor, fill_value and order, and one file per chunk named by its
// chunk indices joined by the dimension_separator ("0.1.2", or "0/1/2").
// A missing chunk holds fill_value everywhere. Edge chunks are stored
// whole and cropped on reading.
//
// ReadZarr reads C-order arrays of dtype u1, u2 or f4 (little-endian, or
// "|" for bytes; big-endian is refused) whose chunks are raw, or
// compressed by gzip, zlib or zstd (numcodecs' ids; zstd through
// klauspost/compress). blosc, the default of the Python zarr package, is
// refused with an error naming it: no Go implementation of it is kept up
// and the machine has no libblosc to bind; re-save such an array with
// compressor=numcodecs.Zstd() or GZip(). Filters are refused too.
// WriteZarr writes the same subset, for tests, `make data` and 3-D
// predictions.

type zarrHeader struct {
	ZarrFormat int             `json:"zarr_format"`
	Shape      []int           `json:"shape"`
	Chunks     []int           `json:"chunks"`
	Dtype      string          `json:"dtype"`
	Compressor *zarrCodec      `json:"compressor"`
	FillValue  json.RawMessage `json:"fill_value"`
	Order      string          `json:"order"`
	Filters    []zarrCodec     `json:"filters"`
	Separator  string          `json:"dimension_separator,omitempty"`
}

type zarrCodec struct {
	ID    string `json:"id"`
	Level int    `json:"level,omitempty"`
	// blosc's inner compressor, named in its error.
	CName string `json:"cname,omitempty"`
}

// ZarrArray is a whole Zarr array read into memory as float32, C order.
type ZarrArray struct {
	Shape []int
	Data  []float32
}

// zarrStore reads a Zarr array's keys (.zarray, chunk names): a missing
// key is an error errors.Is(err, fs.ErrNotExist) tells apart.
type zarrStore interface {
	read(key string) ([]byte, error)
	// parallel is how many keys are read at once: 1 from a folder, more
	// from an object store, where each read is a round trip.
	parallel() int
}

type folderStore string

func (d folderStore) read(key string) ([]byte, error) {
	return os.ReadFile(filepath.Join(string(d), filepath.FromSlash(key)))
}

func (folderStore) parallel() int { return 1 }

// remoteStore reads the keys under a URL (s3://bucket/array.zarr) through
// package remote: its credentials, retries and errors naming the URL.
type remoteStore struct{ o *remote.Object }

func (r remoteStore) read(key string) ([]byte, error) {
	b, err := r.o.Child(key).ReadAll(context.Background())
	if errors.Is(err, remote.ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	return b, err
}

// remoteChunksInFlight bounds the chunk requests of one array: enough
// that a round trip of tens of milliseconds is paid once per 16 chunks.
const remoteChunksInFlight = 16

func (remoteStore) parallel() int { return remoteChunksInFlight }

// ReadZarr reads the Zarr v2 array in the folder dir, or under the URL
// dir (s3://, gs://, https://), chunk by chunk by key.
func ReadZarr(dir string) (*ZarrArray, error) {
	var st zarrStore = folderStore(dir)
	if remote.IsURL(dir) {
		o, err := remote.OpenFolder(dir)
		if err != nil {
			return nil, err
		}
		st, dir = remoteStore{o}, o.URL()
	}
	raw, err := st.read(".zarray")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s is not a Zarr v2 array: it has no .zarray (a Zarr group's arrays are its sub-folders; Zarr v3's zarr.json is not read)", dir)
		}
		return nil, err
	}
	var h zarrHeader
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("%s/.zarray: %w", dir, err)
	}
	if err := h.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	fill, err := h.fill()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	n := 1
	for _, d := range h.Shape {
		n *= d
	}
	a := &ZarrArray{Shape: append([]int(nil), h.Shape...), Data: make([]float32, n)}
	if fill != 0 {
		for i := range a.Data {
			a.Data[i] = fill
		}
	}
	dec, err := h.decoder()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	nd := len(h.Shape)
	grid := make([]int, nd)
	total := 1
	for i := range grid {
		grid[i] = (h.Shape[i] + h.Chunks[i] - 1) / h.Chunks[i]
		total *= grid[i]
	}
	chunkLen := 1
	for _, c := range h.Chunks {
		chunkLen *= c
	}
	size := dtypeSize(h.Dtype)
	// Chunks are read par at a time (in order, a window of them) and
	// placed in order, so a failure is the first chunk's that failed.
	par := st.parallel()
	type got struct {
		body []byte
		err  error
	}
	bodies := make([]got, par)
	idx := make([]int, nd)
	vals := make([]float32, chunkLen)
	keyOf := func(ci int) string {
		k := make([]int, nd)
		for i := nd - 1; i >= 0; i-- {
			k[i] = ci % grid[i]
			ci /= grid[i]
		}
		return h.key(k)
	}
	for c0 := 0; c0 < total; c0 += par {
		n := min(par, total-c0)
		var wg sync.WaitGroup
		for j := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, err := st.read(keyOf(c0 + j))
				bodies[j] = got{b, err}
			}()
		}
		wg.Wait()
		for j := range n {
			ci := c0 + j
			r := ci
			for i := nd - 1; i >= 0; i-- {
				idx[i] = r % grid[i]
				r /= grid[i]
			}
			name := h.key(idx)
			body, err := bodies[j].body, bodies[j].err
			bodies[j] = got{}
			if errors.Is(err, fs.ErrNotExist) {
				continue // a chunk never written holds the fill value
			}
			if err != nil {
				return nil, err
			}
			b, err := dec(body)
			if err != nil {
				return nil, fmt.Errorf("%s: chunk %s: %w", dir, name, err)
			}
			if len(b) != chunkLen*size {
				return nil, fmt.Errorf("%s: chunk %s holds %d bytes after decompression; a %v chunk of %s is %d", dir, name, len(b), h.Chunks, h.Dtype, chunkLen*size)
			}
			decodeValues(h.Dtype, b, vals)
			h.place(a, idx, vals)
		}
	}
	return a, nil
}

func (h *zarrHeader) check() error {
	if h.ZarrFormat != 2 {
		return fmt.Errorf("zarr_format %d; pipe reads Zarr v2", h.ZarrFormat)
	}
	if len(h.Shape) == 0 || len(h.Chunks) != len(h.Shape) {
		return fmt.Errorf("shape %v and chunks %v do not match", h.Shape, h.Chunks)
	}
	for i := range h.Shape {
		if h.Shape[i] < 1 || h.Chunks[i] < 1 {
			return fmt.Errorf("shape %v and chunks %v must be positive", h.Shape, h.Chunks)
		}
	}
	if h.Order != "C" {
		return fmt.Errorf("order %q; pipe reads C-order arrays (re-save with order='C')", h.Order)
	}
	if dtypeSize(h.Dtype) == 0 {
		return fmt.Errorf("dtype %q; pipe reads |u1, <u2 and <f4 (unsigned 8 and 16-bit, little-endian float32)", h.Dtype)
	}
	if len(h.Filters) > 0 {
		return fmt.Errorf("filters %s; pipe reads arrays without filters", h.Filters[0].ID)
	}
	if h.Separator != "" && h.Separator != "." && h.Separator != "/" {
		return fmt.Errorf("dimension_separator %q", h.Separator)
	}
	return nil
}

func dtypeSize(dt string) int {
	switch dt {
	case "|u1", "<u1", "u1":
		return 1
	case "<u2":
		return 2
	case "<f4":
		return 4
	}
	return 0
}

func (h *zarrHeader) fill() (float32, error) {
	s := strings.TrimSpace(string(h.FillValue))
	switch s {
	case "", "null":
		return 0, nil
	case `"NaN"`:
		return float32(math.NaN()), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("fill_value %s: %w", s, err)
	}
	return float32(v), nil
}

// decoder returns the chunk decompressor of the header's compressor.
func (h *zarrHeader) decoder() (func([]byte) ([]byte, error), error) {
	if h.Compressor == nil {
		return func(b []byte) ([]byte, error) { return b, nil }, nil
	}
	switch h.Compressor.ID {
	case "gzip":
		return func(b []byte) ([]byte, error) {
			r, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, err
			}
			return io.ReadAll(r)
		}, nil
	case "zlib":
		return func(b []byte) ([]byte, error) {
			r, err := zlib.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, err
			}
			return io.ReadAll(r)
		}, nil
	case "zstd":
		// One decoder, low memory: chunks are decoded one at a time, and
		// the default (a decoder per core with its own buffers) costs
		// megabytes of resident memory for nothing.
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, err
		}
		return func(b []byte) ([]byte, error) { return d.DecodeAll(b, nil) }, nil
	case "blosc":
		return nil, fmt.Errorf("its chunks are blosc-compressed (cname %s), which pipe does not read; re-save the array with compressor=numcodecs.Zstd() (or GZip(), Zlib(), or None)", h.Compressor.CName)
	}
	return nil, fmt.Errorf("compressor %q; pipe reads gzip, zlib, zstd or none", h.Compressor.ID)
}

func (h *zarrHeader) key(idx []int) string {
	sep := h.Separator
	if sep == "" {
		sep = "."
	}
	parts := make([]string, len(idx))
	for i, v := range idx {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, sep)
}

func decodeValues(dt string, b []byte, out []float32) {
	switch dtypeSize(dt) {
	case 1:
		for i := range out {
			out[i] = float32(b[i])
		}
	case 2:
		for i := range out {
			out[i] = float32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case 4:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
}

// place copies a decoded chunk at chunk index idx into a, cropping at
// the array's edges.
func (h *zarrHeader) place(a *ZarrArray, idx []int, vals []float32) {
	nd := len(h.Shape)
	// Walk the chunk's rows (all axes but the last).
	rows := 1
	for _, c := range h.Chunks[:nd-1] {
		rows *= c
	}
	last := h.Chunks[nd-1]
	pos := make([]int, nd)
	for r := 0; r < rows; r++ {
		rr := r
		ok := true
		off := 0
		for i := nd - 2; i >= 0; i-- {
			pos[i] = rr % h.Chunks[i]
			rr /= h.Chunks[i]
		}
		for i := 0; i < nd-1; i++ {
			g := idx[i]*h.Chunks[i] + pos[i]
			if g >= h.Shape[i] {
				ok = false
				break
			}
			off = off*h.Shape[i] + g
		}
		if !ok {
			continue
		}
		g0 := idx[nd-1] * last
		n := min(last, h.Shape[nd-1]-g0)
		off = off*h.Shape[nd-1] + g0
		copy(a.Data[off:off+n], vals[r*last:r*last+n])
	}
}

// WriteZarr writes data (C order, of shape) as a Zarr v2 array in the
// folder dir, in chunks of the given shape, as dtype "|u1", "<u2" or
// "<f4" (integers rounded and clamped), with compressor "" (none),
// "gzip", "zlib" or "zstd".
func WriteZarr(dir string, shape, chunks []int, dtype, compressor string, data []float32) error {
	h := zarrHeader{ZarrFormat: 2, Shape: shape, Chunks: chunks, Dtype: dtype, Order: "C", FillValue: json.RawMessage("0")}
	if compressor != "" {
		h.Compressor = &zarrCodec{ID: compressor}
		if compressor != "zstd" {
			h.Compressor.Level = 6
		}
	}
	if err := h.check(); err != nil {
		return err
	}
	n := 1
	for _, d := range shape {
		n *= d
	}
	if len(data) != n {
		return fmt.Errorf("zarr: %d values for shape %v", len(data), shape)
	}
	if _, err := os.Stat(filepath.Join(dir, ".zarray")); err == nil {
		// An array written before, perhaps in other chunks: replace it
		// whole rather than leave chunks of it behind.
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	hdr, _ := json.MarshalIndent(h, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, ".zarray"), hdr, 0o644); err != nil {
		return err
	}
	nd := len(shape)
	grid := make([]int, nd)
	total := 1
	for i := range grid {
		grid[i] = (shape[i] + chunks[i] - 1) / chunks[i]
		total *= grid[i]
	}
	chunkLen := 1
	for _, c := range chunks {
		chunkLen *= c
	}
	size := dtypeSize(dtype)
	idx := make([]int, nd)
	pos := make([]int, nd)
	buf := make([]byte, chunkLen*size)
	comp, err := newCompressor(compressor)
	if err != nil {
		return err
	}
	for ci := 0; ci < total; ci++ {
		r := ci
		for i := nd - 1; i >= 0; i-- {
			idx[i] = r % grid[i]
			r /= grid[i]
		}
		for e := 0; e < chunkLen; e++ {
			rr, off, ok := e, 0, true
			for i := nd - 1; i >= 0; i-- {
				pos[i] = rr % chunks[i]
				rr /= chunks[i]
			}
			for i := 0; i < nd; i++ {
				g := idx[i]*chunks[i] + pos[i]
				if g >= shape[i] {
					ok = false
					break
				}
				off = off*shape[i] + g
			}
			var v float32
			if ok {
				v = data[off]
			}
			encodeValue(dtype, buf[e*size:], v)
		}
		body, err := comp(buf)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, h.key(idx)), body, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func encodeValue(dt string, b []byte, v float32) {
	clamp := func(hi float64) float64 { return math.Max(0, math.Min(hi, math.Round(float64(v)))) }
	switch dtypeSize(dt) {
	case 1:
		b[0] = byte(clamp(255))
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(clamp(65535)))
	case 4:
		binary.LittleEndian.PutUint32(b, math.Float32bits(v))
	}
}

// newCompressor returns the chunk compressor of kind, one for all the
// chunks of an array: its writer and output buffer are reused, so
// writing an array leaves no compressor's tables behind per chunk. The
// slice it returns is valid until its next call.
func newCompressor(kind string) (func([]byte) ([]byte, error), error) {
	var out bytes.Buffer
	switch kind {
	case "":
		return func(b []byte) ([]byte, error) { return b, nil }, nil
	case "gzip", "zlib":
		var w interface {
			io.WriteCloser
			Reset(io.Writer)
		}
		if kind == "gzip" {
			w, _ = gzip.NewWriterLevel(&out, 6)
		} else {
			w, _ = zlib.NewWriterLevel(&out, 6)
		}
		return func(b []byte) ([]byte, error) {
			out.Reset()
			w.Reset(&out)
			if _, err := w.Write(b); err != nil {
				return nil, err
			}
			if err := w.Close(); err != nil {
				return nil, err
			}
			return out.Bytes(), nil
		}, nil
	case "zstd":
		e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
		if err != nil {
			return nil, err
		}
		var dst []byte
		return func(b []byte) ([]byte, error) {
			dst = e.EncodeAll(b, dst[:0])
			return dst, nil
		}, nil
	}
	return nil, fmt.Errorf("zarr: compressor %q; pipe writes gzip, zlib, zstd or none", kind)
}
