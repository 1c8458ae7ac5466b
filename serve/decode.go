package serve

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"

	"pipe/dataset"
)

// decode reads a prediction request's samples: x holds n samples of the
// input shape, raw says they are raw values that still need the training
// source's normalisation.
//
//   - application/json: {"inputs": [...], "normalized": false}, each
//     sample nested in the input shape or flat; raw values unless
//     normalized is true;
//   - application/octet-stream: little-endian float32, n samples one after
//     another (X-Pipe-Shape, optional, says [n, input shape...];
//     X-Pipe-Dtype, optional, must be float32); raw unless
//     X-Pipe-Normalized: true;
//   - image/png, image/jpeg (and the other formats the images source
//     reads), or multipart/form-data with one image file: one sample,
//     resized and read as the images source reads it, then normalised.
//
// Any of them may be gzip-compressed (decodeEncoding).
//
// An image waits, within ctx, for one of the Decodes slots.
func (s *Server) decode(ctx context.Context, r *http.Request) (x []float32, n int, raw bool, e *apiError) {
	ct := r.Header.Get("Content-Type")
	mt, params, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil {
		return nil, 0, false, badRequest(http.StatusUnsupportedMediaType, "Content-Type %q: give one of %s", ct, strings.Join(Accepted, ", "))
	}
	switch {
	case mt == "application/json":
		return s.decodeJSON(r)
	case mt == "application/octet-stream":
		return s.decodeRaw(r)
	case strings.HasPrefix(mt, "image/"):
		size := r.ContentLength
		if r.Header.Get("Content-Encoding") != "" {
			size = -1 // the length of what decodeEncoding undoes
		}
		x, e := s.decodeImage(ctx, r.Body, size, mt)
		return x, 1, true, e
	case mt == "multipart/form-data":
		return s.decodeMultipart(ctx, r, params["boundary"])
	}
	return nil, 0, false, badRequest(http.StatusUnsupportedMediaType, "Content-Type %s is not read here: give one of %s", mt, strings.Join(Accepted, ", "))
}

// decodeEncoding undoes the body's Content-Encoding: gzip is read
// through a gzip reader whose output is held to the same body limit as
// an uncompressed body (a few KiB of gzip can inflate to gigabytes);
// identity, or none, is the body as it is. Any other encoding is a 415
// with Accept-Encoding saying which are read (RFC 7694).
func (s *Server) decodeEncoding(w http.ResponseWriter, r *http.Request) *apiError {
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		return nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			if e := s.readErr(err); e.status == http.StatusRequestEntityTooLarge || e.status == http.StatusRequestTimeout {
				return e
			}
			return badRequest(http.StatusBadRequest, "Content-Encoding gzip: the body is not gzip (%v)", err)
		}
		r.Body = http.MaxBytesReader(w, zr, s.cfg.MaxBody)
		return nil
	default:
		w.Header().Set("Accept-Encoding", "gzip, identity")
		return badRequest(http.StatusUnsupportedMediaType, "Content-Encoding %q is not read here: send the body as it is, or gzip-compressed with Content-Encoding: gzip", enc)
	}
}

// readErr turns a body that could not be read into its answer: 413 past
// the body limit, 408 past the read deadline.
func (s *Server) readErr(err error) *apiError {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return badRequest(http.StatusRequestEntityTooLarge, "the body is larger than the limit of %d bytes; send at most %d samples a request", s.cfg.MaxBody, s.cfg.MaxBatch)
	}
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return badRequest(http.StatusRequestTimeout, "the body did not arrive within the timeout of %v", s.cfg.Timeout)
	}
	return badRequest(http.StatusBadRequest, "reading the body: %v", err)
}

func (s *Server) tooMany(n int) *apiError {
	if n > s.cfg.MaxBatch {
		return badRequest(http.StatusRequestEntityTooLarge, "%d samples in one request; at most %d (max_batch)", n, s.cfg.MaxBatch)
	}
	if n == 0 {
		return badRequest(http.StatusBadRequest, "no samples: give at least one")
	}
	return nil
}

type jsonRequest struct {
	Inputs     json.RawMessage `json:"inputs"`
	Normalized bool            `json:"normalized"`
}

func (s *Server) decodeJSON(r *http.Request) ([]float32, int, bool, *apiError) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, 0, false, s.readErr(err)
	}
	var req jsonRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, 0, false, badRequest(http.StatusBadRequest, "the body is not a JSON prediction request (%v): send {\"inputs\": [sample, ...], \"normalized\": false}", err)
	}
	// Decode stops after the first value; what follows it must be space.
	if _, err := dec.Token(); err != io.EOF {
		return nil, 0, false, badRequest(http.StatusBadRequest, "the body goes on after the JSON request, at byte %d: send one object, {\"inputs\": [sample, ...]}, and nothing after it", dec.InputOffset())
	}
	if k := duplicateKey(body); k != "" {
		return nil, 0, false, badRequest(http.StatusBadRequest, "the key %q appears twice in the request: give each of \"inputs\" and \"normalized\" once", k)
	}
	if len(req.Inputs) == 0 {
		return nil, 0, false, badRequest(http.StatusBadRequest, "no \"inputs\": send {\"inputs\": [sample, ...]}, each sample of shape %s, nested or flat", shapeString(s.info.InputShape))
	}
	// Flat samples decode straight into float32; nested ones through
	// their tree.
	// (encoding/json reads null as 0, so a body with null takes the tree,
	// which refuses it.)
	var flat [][]float32
	if !bytes.Contains(req.Inputs, []byte("null")) && json.Unmarshal(req.Inputs, &flat) == nil {
		if e := s.tooMany(len(flat)); e != nil {
			return nil, 0, false, e
		}
		x := make([]float32, 0, len(flat)*s.inLen)
		for i, v := range flat {
			if len(v) != s.inLen {
				return nil, 0, false, s.shapeErr(i, fmt.Sprintf("a flat array of %d values", len(v)))
			}
			x = append(x, v...)
		}
		return x, len(flat), !req.Normalized, nil
	}
	var tree any
	if err := json.Unmarshal(req.Inputs, &tree); err != nil {
		return nil, 0, false, badRequest(http.StatusBadRequest, "inputs: %v", err)
	}
	samples, ok := tree.([]any)
	if !ok {
		return nil, 0, false, badRequest(http.StatusBadRequest, "inputs must be a list of samples, each of shape %s (nested or flat); found %s", shapeString(s.info.InputShape), kind(tree))
	}
	if e := s.tooMany(len(samples)); e != nil {
		return nil, 0, false, e
	}
	x := make([]float32, 0, len(samples)*s.inLen)
	for i, smp := range samples {
		var err error
		sh := s.info.InputShape
		if l, ok := smp.([]any); ok && len(l) == s.inLen && (len(sh) == 1 || sh[0] != int64(s.inLen)) {
			x, err = flatten(x, smp, []int64{int64(s.inLen)})
		} else {
			x, err = flatten(x, smp, s.info.InputShape)
		}
		if err != nil {
			var te *typeErr
			if errors.As(err, &te) {
				return nil, 0, false, badRequest(http.StatusBadRequest, "sample %d: inputs must be numbers (float32); found %s", i, te.found)
			}
			return nil, 0, false, s.shapeErr(i, err.Error())
		}
	}
	return x, len(samples), !req.Normalized, nil
}

// duplicateKey returns a top-level key of the JSON object body that
// appears twice, "" when none does. encoding/json keeps the last of two
// silently, and matches keys to fields without regard to case, so
// "inputs" and "Inputs" count as the same key. body is known to hold one
// valid object.
func duplicateKey(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		k, _ := t.(string)
		if seen[strings.ToLower(k)] {
			return k
		}
		seen[strings.ToLower(k)] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return ""
		}
	}
	return ""
}

func (s *Server) shapeErr(i int, found string) *apiError {
	return badRequest(http.StatusBadRequest, "sample %d: expected shape %s (%d values, nested or flat); found %s", i, shapeString(s.info.InputShape), s.inLen, found)
}

type typeErr struct{ found string }

func (e *typeErr) Error() string { return "found " + e.found }

// flatten appends v, which must be nested lists of numbers of the given
// shape, to x.
func flatten(x []float32, v any, shape []int64) ([]float32, error) {
	if len(shape) == 0 {
		f, ok := v.(float64)
		if !ok {
			if _, isList := v.([]any); isList {
				return x, errors.New("a list nested deeper than the shape")
			}
			return x, &typeErr{kind(v)}
		}
		if f > math.MaxFloat32 || f < -math.MaxFloat32 {
			return x, &typeErr{fmt.Sprintf("%g, outside float32's range", f)}
		}
		return append(x, float32(f)), nil
	}
	l, ok := v.([]any)
	if !ok {
		if isNumber(v) {
			return x, fmt.Errorf("a number where a list of %d was expected", shape[0])
		}
		return x, &typeErr{kind(v)}
	}
	if int64(len(l)) != shape[0] {
		return x, fmt.Errorf("a list of %d where %d were expected", len(l), shape[0])
	}
	var err error
	for _, e := range l {
		if x, err = flatten(x, e, shape[1:]); err != nil {
			return x, err
		}
	}
	return x, nil
}

func isNumber(v any) bool { _, ok := v.(float64); return ok }

func kind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", v)
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func (s *Server) decodeRaw(r *http.Request) ([]float32, int, bool, *apiError) {
	if dt := r.Header.Get("X-Pipe-Dtype"); dt != "" && dt != "float32" {
		return nil, 0, false, badRequest(http.StatusBadRequest, "X-Pipe-Dtype %s: the raw body must be little-endian float32", dt)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, 0, false, s.readErr(err)
	}
	per := 4 * s.inLen
	if len(body) == 0 || len(body)%per != 0 {
		return nil, 0, false, badRequest(http.StatusBadRequest, "a raw body of %d bytes: expected a whole number of samples of %s float32 values (%d bytes each)", len(body), shapeString(s.info.InputShape), per)
	}
	n := len(body) / per
	if h := r.Header.Get("X-Pipe-Shape"); h != "" {
		want := shapeHeader(append([]int64{int64(n)}, s.info.InputShape...))
		got := strings.NewReplacer("[", "", "]", "", " ", "").Replace(h)
		if got != want {
			return nil, 0, false, badRequest(http.StatusBadRequest, "X-Pipe-Shape %s: the body holds %d samples, so expected %s", h, n, want)
		}
	}
	if e := s.tooMany(n); e != nil {
		return nil, 0, false, e
	}
	x := make([]float32, n*s.inLen)
	for i := range x {
		v := math.Float32frombits(binary.LittleEndian.Uint32(body[4*i:]))
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, 0, false, badRequest(http.StatusBadRequest, "value %d of the raw body is %v: give finite numbers", i, v)
		}
		x[i] = v
	}
	norm, _ := strconv.ParseBool(r.Header.Get("X-Pipe-Normalized"))
	return x, n, !norm, nil
}

// imageInput says whether the model reads images: an input [C, H, W]
// with 1 or 3 channels.
func (s *Server) imageInput() (c, h, w int, ok bool) {
	sh := s.info.InputShape
	if len(sh) != 3 || (sh[0] != 1 && sh[0] != 3) {
		return 0, 0, 0, false
	}
	return int(sh[0]), int(sh[1]), int(sh[2]), true
}

// decodeImage reads one image and returns its sample. The header is
// read first, so an image larger than MaxDecodePixels (a small file may
// claim a huge one) is refused before it is decoded; then the image
// waits, within ctx, for a decode slot, so that at most Decodes images
// are held decoded at once.
func (s *Server) decodeImage(ctx context.Context, body io.Reader, size int64, what string) ([]float32, *apiError) {
	c, h, w, ok := s.imageInput()
	if !ok {
		return nil, badRequest(http.StatusUnsupportedMediaType, "%s: this model reads %s, not images; send application/json or application/octet-stream", what, shapeString(s.info.InputShape))
	}
	b, err := readSized(body, size, s.cfg.MaxBody)
	if err != nil {
		return nil, s.readErr(err)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, badRequest(http.StatusUnsupportedMediaType, "%s: the body is not an image that decodes (%v); send a PNG or JPEG", what, err)
	}
	px, cost := int64(cfg.Width)*int64(cfg.Height), decodeCost(cfg, format, b)
	if px > s.cfg.MaxDecodePixels || cost > s.cfg.DecodeBytes {
		return nil, badRequest(http.StatusRequestEntityTooLarge,
			"%s: a %s of %dx%d pixels is larger than this server decodes: at most %d pixels (the serve block's max_decode_factor times the model's %dx%d input, or more); resize it to %dx%d, or at least near it, before sending",
			what, format, cfg.Width, cfg.Height, s.cfg.MaxDecodePixels, w, h, w, h)
	}
	dm := &s.decodeMem
	dm.waiting.Add(1)
	select {
	case s.decodes <- struct{}{}:
		dm.waiting.Add(-1)
	case <-ctx.Done():
		dm.waiting.Add(-1)
		return nil, &apiError{status: http.StatusServiceUnavailable, retry: true,
			msg: fmt.Sprintf("no image decode slot within the timeout of %v (%d decode at once); retry later", s.cfg.Timeout, s.cfg.Decodes)}
	}
	s.m.decoding.Inc()
	s.room(cost)
	px8, err := resized(b, c, h, w)
	read := int64(len(b))
	b = nil // garbage now, for settle's collection
	s.m.decoding.Dec()
	<-s.decodes
	s.settle(cost, read)
	if err != nil {
		return nil, badRequest(http.StatusUnsupportedMediaType, "%s: the %s does not decode (%v); send a PNG or JPEG", what, format, err)
	}
	x := make([]float32, len(px8))
	for i, v := range px8 {
		x[i] = float32(v)
	}
	return x, nil
}

// readSized reads r to its end. When the sender gave the length, size,
// and it is within limit, the body is read into one slice of that size:
// io.ReadAll's growing chunks and final copy hold twice an upload while
// it arrives, for every upload waiting on a decode slot at once.
// Otherwise (size -1: unknown) it is io.ReadAll.
func readSized(r io.Reader, size, limit int64) ([]byte, error) {
	if size <= 0 || size > limit {
		return io.ReadAll(r)
	}
	// One byte more than claimed tells a longer body (net/http stops at
	// Content-Length; another reader may not).
	b := make([]byte, size+1)
	n, err := io.ReadFull(r, b)
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		return b[:n], nil
	case err != nil:
		return nil, err
	}
	rest, err := io.ReadAll(r)
	return append(b, rest...), err
}

// resized decodes the image b and resizes it to c x h x w bytes, as the
// images source reads it. The decoded image is this function's alone, so
// it is garbage once resized: nothing of full size outlives the decode
// slot.
func resized(b []byte, c, h, w int) ([]byte, error) {
	img, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return dataset.ImageBytes(img, c, h, w), nil
}

// decodeCost is the most the standard decoders hold while decoding an
// image of cfg, read from its header: its pixels in their colour model;
// for a JPEG 4 bytes more a component (a progressive JPEG's
// coefficients; the header does not tell it from a baseline one); for an
// interlaced PNG half as much again (a pass beside the image); for a TIFF
// twice (its decompressed strips); for a WebP 4 more (lossless ARGB
// words). planner.ServeDecodeBytesPerPixel is the largest of these.
func decodeCost(cfg image.Config, format string, b []byte) int64 {
	px := int64(cfg.Width) * int64(cfg.Height)
	bpp := int64(8)
	comps := int64(3)
	switch cfg.ColorModel {
	case color.GrayModel, color.AlphaModel:
		bpp, comps = 1, 1
	case color.Gray16Model, color.Alpha16Model:
		bpp, comps = 2, 1
	case color.YCbCrModel:
		bpp = 3
	case color.RGBAModel, color.NRGBAModel, color.NYCbCrAModel:
		bpp = 4
	case color.CMYKModel:
		bpp, comps = 4, 4
	case color.RGBA64Model, color.NRGBA64Model:
		bpp = 8
	}
	if _, ok := cfg.ColorModel.(color.Palette); ok {
		bpp = 1
	}
	n := px * bpp
	switch format {
	case "jpeg":
		n += px * 4 * comps
	case "png":
		// IHDR's interlace method: 8 bytes of signature, 8 of chunk
		// header, then width, height, depth, colour type, compression
		// and filter before it.
		if len(b) > 28 && b[28] == 1 {
			n += n / 2
		}
	case "tiff":
		n *= 2
	case "webp":
		n += px * 4
	}
	return n
}

func (s *Server) decodeMultipart(ctx context.Context, r *http.Request, boundary string) ([]float32, int, bool, *apiError) {
	if boundary == "" {
		return nil, 0, false, badRequest(http.StatusBadRequest, "multipart/form-data without a boundary")
	}
	mr := multipart.NewReader(r.Body, boundary)
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil, 0, false, badRequest(http.StatusBadRequest, "the form holds no file: upload one image as a file field")
		}
		if err != nil {
			return nil, 0, false, s.readErr(err)
		}
		if p.FileName() == "" {
			continue
		}
		what := "the file " + strconv.Quote(p.FileName())
		x, e := s.decodeImage(ctx, p, -1, what)
		return x, 1, true, e
	}
}

func shapeString(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
