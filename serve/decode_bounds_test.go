package serve

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"mime/multipart"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pipe/planner"
)

// pngOf encodes an opaque w x h image of one colour: RGBA64 gives a
// 16-bit PNG, which decodes to 8 bytes a pixel; Gray to 1.
func pngOf(t testing.TB, img image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var (
	hugeOnce sync.Once
	hugePNG  []byte
)

// huge is the report's image: an 8192x8192 PNG of one grey, a small file
// (about 100 KiB) that claims 64 Mpixel.
func huge(t *testing.T) []byte {
	hugeOnce.Do(func() { hugePNG = pngOf(t, image.NewGray(image.Rect(0, 0, 8192, 8192))) })
	return hugePNG
}

// An image whose header claims more pixels than MaxDecodePixels gets 413
// naming the limit, as a body and as a form's file, and is never
// decoded: the handler allocates far less than the 64 MiB its pixels
// would take.
func TestLargeImageRefusedByItsHeader(t *testing.T) {
	s := newServer(t, baseConfig())
	b := huge(t)
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("image", "huge.png")
	fw.Write(b)
	mw.Close()
	for name, post := range map[string]func() *http.Response{
		"body": func() *http.Response { return postResult(t, s, "image/png", b) },
		"form": func() *http.Response { return postResult(t, s, mw.FormDataContentType(), form.Bytes()) },
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		res := post()
		runtime.ReadMemStats(&after)
		msg := readAll(t, res)
		if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(msg, "8192x8192") || !strings.Contains(msg, "at most "+strconv.Itoa(1<<20)+" pixels") {
			t.Errorf("%s: an 8192x8192 PNG with a limit of %d pixels: status %d, %s", name, 1<<20, res.StatusCode, msg)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
			t.Errorf("%s: refusing it allocated %d bytes: it was decoded", name, alloc)
		}
	}
	// At the limit it is read.
	ok := pngOf(t, image.NewGray(image.Rect(0, 0, 1024, 1024)))
	if res := postResult(t, s, "image/png", ok); res.StatusCode != http.StatusOK {
		t.Errorf("a 1024x1024 PNG at a limit of %d pixels: status %d, %s", 1<<20, res.StatusCode, readAll(t, res))
	}
}

func postResult(t *testing.T, s *Server, ct string, body []byte) *http.Response {
	t.Helper()
	return post(t, s.Handler(), ct, bytes.NewReader(body)).Result()
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	var b bytes.Buffer
	b.ReadFrom(res.Body)
	return b.String()
}

// An image waits for a decode slot: with every slot taken it gets 503
// and Retry-After once its timeout passes; with one free it is answered.
func TestImageWaitsForADecodeSlot(t *testing.T) {
	cfg := baseConfig()
	cfg.Decodes = 1
	cfg.Timeout = 300 * time.Millisecond
	s := newServer(t, cfg)
	img := pngOf(t, image.NewGray(image.Rect(0, 0, 32, 32)))
	s.decodes <- struct{}{} // the one slot, held
	res := postResult(t, s, "image/png", img)
	if msg := readAll(t, res); res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" || !strings.Contains(msg, "decode slot") {
		t.Errorf("every decode slot taken: status %d, Retry-After %q, %s", res.StatusCode, res.Header.Get("Retry-After"), msg)
	}
	<-s.decodes
	if res := postResult(t, s, "image/png", img); res.StatusCode != http.StatusOK {
		t.Errorf("a free slot: status %d, %s", res.StatusCode, readAll(t, res))
	}
}

// decodeCost prices every colour model the standard decoders give within
// the planner's bytes a pixel, and at least the decoded image's own.
func TestDecodeCostWithinThePlan(t *testing.T) {
	const w, h = 100, 50
	models := map[string]color.Model{
		"gray": color.GrayModel, "gray16": color.Gray16Model, "alpha": color.AlphaModel, "rgba": color.RGBAModel,
		"nrgba": color.NRGBAModel, "rgba64": color.RGBA64Model, "nrgba64": color.NRGBA64Model, "ycbcr": color.YCbCrModel,
		"nycbcra": color.NYCbCrAModel, "cmyk": color.CMYKModel, "palette": color.Palette{color.Black}, "other": color.ModelFunc(func(c color.Color) color.Color { return c }),
	}
	interlaced := make([]byte, 40)
	interlaced[28] = 1
	for name, m := range models {
		for _, format := range []string{"png", "jpeg", "gif", "bmp", "tiff", "webp"} {
			for _, b := range [][]byte{nil, interlaced} {
				c := decodeCost(image.Config{ColorModel: m, Width: w, Height: h}, format, b)
				if c > w*h*planner.ServeDecodeBytesPerPixel || c < w*h {
					t.Errorf("%s %s: %d bytes for %d pixels, outside [1, %d] a pixel", format, name, c, w*h, planner.ServeDecodeBytesPerPixel)
				}
			}
		}
	}
	// A 4:4:4 JPEG's real header, and a 16-bit PNG's: their decoded images fit.
	var buf bytes.Buffer
	jpeg.Encode(&buf, image.NewRGBA(image.Rect(0, 0, w, h)), nil)
	cfg, _, _ := image.DecodeConfig(bytes.NewReader(buf.Bytes()))
	if c := decodeCost(cfg, "jpeg", buf.Bytes()); c < w*h*3 {
		t.Errorf("a %dx%d JPEG priced at %d bytes", w, h, c)
	}
	p := pngOf(t, image.NewRGBA64(image.Rect(0, 0, w, h)))
	cfg, _, _ = image.DecodeConfig(bytes.NewReader(p))
	if c := decodeCost(cfg, "png", p); c < w*h*8 {
		t.Errorf("a %dx%d 16-bit PNG priced at %d bytes, less than its 8 a pixel", w, h, c)
	}
}
