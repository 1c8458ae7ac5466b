package dataset

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"pipe/spec"
)

// IDX is the format of MNIST and Fashion-MNIST: a 4-byte magic number
// (two zero bytes, the element type, the number of dimensions), one
// big-endian uint32 per dimension, then the elements row-major. Only
// unsigned bytes (type 0x08) are read: images of magic 0x00000803
// ([N, H, W]) and labels of magic 0x00000801 ([N]). Files may be gzipped;
// the gzip magic decides, not the name.

const idxUbyte = 0x08

// idxFile is a decoded IDX file.
type idxFile struct {
	dims []int
	data []byte
}

// readIDX reads a raw or gzipped IDX file of unsigned bytes. Errors name
// the file (as written in the block) and the byte offset in the IDX
// stream (after decompression) where it went wrong.
func readIDX(c *config, p string) (*idxFile, error) {
	h, err := openIDXHeader(c, p)
	if err != nil {
		return nil, err
	}
	defer h.close()
	r, gz, out := h.r, h.gz, &idxFile{dims: h.dims}
	total := int64(1)
	for _, d := range out.dims {
		total *= int64(d)
	}
	off := int64(4 + 4*len(out.dims))
	if !gz && h.size-off < total {
		return nil, fmt.Errorf("%s: truncated IDX: the header says %s (%d bytes from offset %d) but the file has only %d bytes after the header",
			p, describeDims(out.dims), total, off, h.size-off)
	}
	// Grow the buffer as data arrives rather than trusting the header's
	// size for the allocation: a damaged header must not allocate much.
	var buf bytes.Buffer
	if !gz {
		buf.Grow(int(total))
	} else {
		buf.Grow(int(min(total, 64<<20)))
	}
	n, err := io.CopyN(&buf, r, total)
	if err != nil {
		if gz && errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%s: truncated IDX: the gzip stream is cut short after %d of the %d bytes the header announces (%s), at offset %d",
				p, n, total, describeDims(out.dims), off+n)
		}
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: truncated IDX: the header says %s (%d bytes from offset %d) but the data ends after %d bytes, at offset %d",
				p, describeDims(out.dims), total, off, n, off+n)
		}
		return nil, fmt.Errorf("%s: reading IDX data at offset %d: %w", p, off+n, err)
	}
	var extra [1]byte
	if k, _ := io.ReadFull(r, extra[:]); k > 0 {
		return nil, fmt.Errorf("%s: the file goes on after the %s its IDX header announces (at offset %d); is the header damaged?",
			p, describeDims(out.dims), off+total)
	}
	out.data = buf.Bytes()
	return out, nil
}

// idxHeader is an IDX file opened and its header read and checked: r
// reads the data that follows it.
type idxHeader struct {
	dims  []int
	r     io.Reader
	gz    bool
	size  int64 // the file's size on disk
	close func()
}

// openIDXHeader opens a raw or gzipped IDX file of unsigned bytes and
// reads its header. Errors name the file and the byte offset in the IDX
// stream (after decompression).
func openIDXHeader(c *config, p string) (h *idxHeader, err error) {
	f, err := openFile(c, p)
	if err != nil {
		return nil, err
	}
	hd := &idxHeader{close: func() { f.Close() }}
	defer func() {
		if err != nil {
			hd.close()
		}
	}()
	h = hd
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	h.size = st.Size()
	br := bufio.NewReaderSize(f, 1<<16)
	h.r = br
	if m, _ := br.Peek(2); len(m) == 2 && m[0] == 0x1f && m[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: bad gzip header: %w", p, err)
		}
		h.close = func() { zr.Close(); f.Close() }
		h.r, h.gz = zr, true
	}
	var hdr [4]byte
	if n, err := io.ReadFull(h.r, hdr[:]); err != nil {
		return nil, fmt.Errorf("%s: truncated IDX: %d of the 4 magic bytes at offset 0%s", p, n, gzipNote(h.gz, err))
	}
	magic := binary.BigEndian.Uint32(hdr[:])
	if hdr[0] != 0 || hdr[1] != 0 || hdr[3] == 0 {
		return nil, fmt.Errorf("%s: not an IDX file: magic 0x%08x at offset 0 (expected 0x00000801 for labels or 0x00000803 for images)", p, magic)
	}
	if hdr[2] != idxUbyte {
		return nil, fmt.Errorf("%s: IDX element type 0x%02x (magic 0x%08x) is not supported; only unsigned bytes (0x08) are", p, hdr[2], magic)
	}
	nd := int(hdr[3])
	dimBytes := make([]byte, 4*nd)
	if n, err := io.ReadFull(h.r, dimBytes); err != nil {
		return nil, fmt.Errorf("%s: truncated IDX: the header announces %d dimensions but ends after %d of their %d bytes at offset 4%s",
			p, nd, n, 4*nd, gzipNote(h.gz, err))
	}
	h.dims = make([]int, nd)
	total := int64(1)
	for i := range h.dims {
		d := binary.BigEndian.Uint32(dimBytes[4*i:])
		h.dims[i] = int(d)
		total *= int64(d)
		if total > 1<<40 {
			return nil, fmt.Errorf("%s: IDX header announces an implausible size %v", p, h.dims)
		}
	}
	return h, nil
}

func gzipNote(gz bool, err error) string {
	if gz && errors.Is(err, io.ErrUnexpectedEOF) {
		return " (the gzip stream is cut short)"
	}
	return ""
}

func describeDims(d []int) string {
	if len(d) == 0 {
		return "no items"
	}
	s := make([]string, len(d)-1)
	for i, x := range d[1:] {
		s[i] = fmt.Sprint(x)
	}
	if len(s) == 0 {
		return fmt.Sprintf("%d items", d[0])
	}
	return fmt.Sprintf("%d items of %s", d[0], strings.Join(s, "x"))
}

// idxDataset holds an IDX image file and its labels in memory as bytes;
// Read converts through a 256-entry table.
type idxDataset struct {
	n       int
	xshape  []int64
	size    int // bytes per image
	images  []byte
	labels  []byte
	classes int
	lut     [256]float32
	norm    Norm
}

func openIDX(b *spec.Source, c *config) (Dataset, error) {
	ip, lp := b.IDX.Images, b.IDX.Labels
	im, err := readIDX(c, ip)
	if err != nil {
		return nil, blockErr(b, "images", err)
	}
	lb, err := readIDX(c, lp)
	if err != nil {
		return nil, blockErr(b, "labels", err)
	}
	xshape, err := idxShape(b, im.dims, lb.dims)
	if err != nil {
		return nil, err
	}
	d := &idxDataset{n: im.dims[0], images: im.data, labels: lb.data, xshape: xshape}
	d.size = prod(d.xshape)
	for _, l := range d.labels {
		d.classes = max(d.classes, int(l)+1)
	}
	mode := b.IDX.Normalize
	if mode == "" {
		mode = "scale"
	}
	switch mode {
	case "none":
	case "scale":
		d.norm = Norm{Mean: []float64{0}, Std: []float64{255}}
	case "standard":
		if c.norm != nil && len(c.norm.Mean) == 1 {
			d.norm = *c.norm
		} else {
			d.norm = byteStats(d.images)
		}
	default:
		return nil, blockErr(b, "normalize", fmt.Errorf("idx source %s: normalize %s is not supported", b.Name, mode))
	}
	for v := range d.lut {
		d.lut[v] = float32(v)
		if len(d.norm.Mean) == 1 {
			d.lut[v] = float32((float64(v) - d.norm.Mean[0]) / d.norm.Std[0])
		}
	}
	return d, nil
}

// idxShape checks an idx source's images and labels headers against each
// other and gives a sample's shape: [1, H, W] for images of [N, H, W], the
// item's dimensions otherwise. Open and SampleShape both use it.
func idxShape(b *spec.Source, im, lb []int) ([]int64, error) {
	ip, lp := b.IDX.Images, b.IDX.Labels
	if len(im) < 2 {
		return nil, blockErr(b, "images", fmt.Errorf("%s: an IDX image file has at least 2 dimensions (N, then each item's), this one has %v", ip, im))
	}
	if len(lb) != 1 {
		return nil, blockErr(b, "labels", fmt.Errorf("%s: an IDX label file has 1 dimension (N), this one has %v", lp, lb))
	}
	if im[0] != lb[0] {
		return nil, blockErr(b, "labels", fmt.Errorf("%s has %d labels but %s has %d images", lp, lb[0], ip, im[0]))
	}
	if len(im) == 3 { // [N, H, W]: one channel
		return []int64{1, int64(im[1]), int64(im[2])}, nil
	}
	var xs []int64
	for _, x := range im[1:] {
		xs = append(xs, int64(x))
	}
	return xs, nil
}

// byteStats is the mean and standard deviation of bytes, from a histogram.
func byteStats(b []byte) Norm {
	var h [256]int64
	for _, v := range b {
		h[v]++
	}
	var n, s, ss float64
	for v, k := range h {
		f := float64(k)
		n += f
		s += f * float64(v)
		ss += f * float64(v) * float64(v)
	}
	mean := s / n
	std := math.Sqrt(max(ss/n-mean*mean, 0))
	if std == 0 {
		std = 1
	}
	return Norm{Mean: []float64{mean}, Std: []float64{std}}
}

func (d *idxDataset) Len() int        { return d.n }
func (d *idxDataset) XShape() []int64 { return append([]int64(nil), d.xshape...) }
func (d *idxDataset) YShape() []int64 { return []int64{} }
func (d *idxDataset) Classes() int    { return d.classes }
func (d *idxDataset) HasMask() bool   { return false }
func (d *idxDataset) Norm() Norm      { return d.norm }
func (d *idxDataset) Close() error    { return nil }

func (d *idxDataset) Read(i int, x, y, _ []float32) error {
	if i < 0 || i >= d.n {
		return fmt.Errorf("idx: sample %d out of range [0, %d)", i, d.n)
	}
	src := d.images[i*d.size : (i+1)*d.size]
	x = x[:len(src)]
	for j, v := range src {
		x[j] = d.lut[v]
	}
	y[0] = float32(d.labels[i])
	return nil
}

// LabelCounts implements LabelCounter.
func (d *idxDataset) LabelCounts() []int {
	c := make([]int, d.classes)
	for _, l := range d.labels {
		c[l]++
	}
	return c
}
