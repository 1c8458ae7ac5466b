package serve

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"pipe/dataset"
	"pipe/engine/native"
	"pipe/internal/progtest"

	"pipe/engine/costs"
	"pipe/lang"
	"pipe/planner"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/run/folder"
	"pipe/stdlib"
)

const tinySrc = `pipeline tiny
seed 3
source blobs synthetic { samples 64  shape [1, 6, 6]  classes 3  seed 5 }
model small {
  input [1, 6, 6]
  conv 4 k3 pad1 -> batchnorm -> relu -> flatten -> dense 3
}
train { epochs 1  batch 16  optimizer adam lr 0.01  loss cross_entropy }
`

const inLen, outLen = 36, 3

var (
	ckptOnce sync.Once
	ckptDir  string
	ckptPath string
	ckptErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if ckptDir != "" {
		os.RemoveAll(ckptDir)
	}
	os.Exit(code)
}

// checkpoint trains the tiny model for two steps, once per test binary,
// and returns its checkpoint.
func checkpoint(t *testing.T) string {
	t.Helper()
	ckptOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pipe-serve-test")
		if err != nil {
			ckptErr = err
			return
		}
		ckptDir = dir
		p, prog := tinyPlan(t)
		ck := filepath.Join(dir, "ckpt")
		if _, ds := run.Run(context.Background(), p, progtest.Decoded(t, prog), run.Hooks{}, run.WithBackend(native.Backend{}), run.WithBase(dir),
			run.WithCheckpointDir(ck), run.WithThreads(1), run.WithMaxSteps(2)); ds.HasErrors() {
			ckptErr = fmt.Errorf("training the tiny model: %v", ds)
			return
		}
		ckptPath = filepath.Join(ck, folder.LastCheckpoint)
	})
	if ckptErr != nil {
		t.Fatal(ckptErr)
	}
	return ckptPath
}

func tinyPlan(t *testing.T) (*plan.Plan, *lang.Program) {
	t.Helper()
	f, ds := lang.Parse("tiny.pipe", []byte(tinySrc))
	prog, cds := lang.Check(f, stdlib.Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		t.Fatalf("the tiny program does not check:\n%v", ds)
	}
	p, pds := planner.Plan(progtest.Decoded(t, prog), planner.WithCosts(costs.Engines()...), planner.WithSource([]byte(tinySrc)), planner.WithDevice("cpu"), planner.WithServe(),
		planner.WithHost(planner.HostInfo{MemTotal: 8 << 30, MemAvailable: 8 << 30, Cores: 2}))
	if p == nil || pds.HasErrors() {
		t.Fatalf("the tiny program does not plan:\n%v", pds)
	}
	return p, prog
}

// load loads n workers of the tiny model for batches of batch samples.
func load(t *testing.T, n, batch int) []*run.Trained {
	t.Helper()
	path := checkpoint(t)
	p, prog := tinyPlan(t)
	var ws []*run.Trained
	for range n {
		tr, err := run.LoadTrained(p, progtest.Decoded(t, prog), path, native.Backend{}, batch, 1)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, tr)
	}
	return ws
}

func newServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := New(load(t, 1, cfg.MaxBatch), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Drain)
	return s
}

// newGated is newServer with the first batch held until release is
// called: what arrives meanwhile queues behind it.
func newGated(t *testing.T, cfg Config) (s *Server, release func()) {
	t.Helper()
	s, release, _ = newGatedFirst(t, cfg)
	return s, release
}

// newGatedFirst is newGated, also giving the size of the first batch
// (0 until it has formed).
func newGatedFirst(t *testing.T, cfg Config) (s *Server, release func(), firstBatch *atomic.Int64) {
	t.Helper()
	s, err := build(load(t, 1, cfg.MaxBatch), cfg)
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	var first sync.Once
	firstBatch = new(atomic.Int64)
	s.gate = func(n int) {
		first.Do(func() {
			firstBatch.Store(int64(n))
			<-gate
		})
	}
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	s.start()
	t.Cleanup(func() {
		release()
		s.Drain()
	})
	return s, release, firstBatch
}

func baseConfig() Config {
	return Config{MaxBatch: 8, MaxWait: time.Millisecond, Batching: true, Queue: 64, MaxBody: 1 << 20, Timeout: 20 * time.Second,
		MaxDecodePixels: 1 << 20, DecodeBytes: 20 << 20, Decodes: 2}
}

func sample(i int) []float32 {
	x := make([]float32, inLen)
	for k := range x {
		x[k] = float32(math.Sin(float64(i*inLen + k)))
	}
	return x
}

func jsonBody(t *testing.T, v any) io.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

func post(t *testing.T, h http.Handler, ct string, body io.Reader, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/v1/predict", body)
	if ct != "" {
		r.Header.Set("Content-Type", ct)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func decodeResponse(t *testing.T, w *httptest.ResponseRecorder) Response {
	t.Helper()
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var res Response
	if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// Served outputs are Trained.Predict's on the same inputs, whether the
// samples come flat, nested or as raw float32, and a classifier's
// answer names the largest probability's class.
func TestServedOutputsArePredicts(t *testing.T) {
	s := newServer(t, baseConfig())
	ref := load(t, 1, 8)[0]
	defer ref.Close()
	x := append(sample(0), sample(1)...)
	want := make([]float32, 2*outLen)
	norm := append([]float32(nil), x...)
	ref.Normalize(norm, 2)
	if err := ref.Predict(norm, 2, want); err != nil {
		t.Fatal(err)
	}
	// Nested as [1][6][6]: one channel of six rows.
	rows := make([][]float32, 6)
	for r := range rows {
		rows[r] = sample(1)[r*6 : (r+1)*6]
	}
	for name, body := range map[string]any{
		"flat":   map[string]any{"inputs": [][]float32{sample(0), sample(1)}},
		"nested": map[string]any{"inputs": []any{sample(0), [][][]float32{rows}}},
	} {
		res := decodeResponse(t, post(t, s.Handler(), "application/json", jsonBody(t, body)))
		if len(res.Outputs) != 2 || len(res.Predictions) != 2 {
			t.Fatalf("%s: %d outputs and %d predictions, want 2", name, len(res.Outputs), len(res.Predictions))
		}
		for i, o := range res.Outputs {
			for k, v := range o {
				if v != want[i*outLen+k] {
					t.Fatalf("%s: sample %d output %d: served %g, Predict %g", name, i, k, v, want[i*outLen+k])
				}
			}
			p := res.Predictions[i]
			for k, q := range p.Probabilities {
				if q > p.Probabilities[p.Class] {
					t.Errorf("%s: sample %d: class %d, but class %d is more probable", name, i, p.Class, k)
				}
			}
		}
	}
	raw := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	w := post(t, s.Handler(), "application/octet-stream", bytes.NewReader(raw), "X-Pipe-Shape", "2,1,6,6", "Accept", "application/octet-stream")
	if w.Code != http.StatusOK || w.Header().Get("X-Pipe-Shape") != "2,3" || w.Body.Len() != 4*len(want) {
		t.Fatalf("raw: status %d, shape %q, %d bytes: %s", w.Code, w.Header().Get("X-Pipe-Shape"), w.Body.Len(), w.Body)
	}
	for i := range want {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(w.Body.Bytes()[4*i:])); got != want[i] {
			t.Fatalf("raw output %d: %g, Predict %g", i, got, want[i])
		}
	}
}

// An uploaded image is read as the images source reads it: a uniform
// image of value v gives the output of a sample of v everywhere.
func TestImageUpload(t *testing.T) {
	s := newServer(t, baseConfig())
	img := image.NewRGBA(image.Rect(0, 0, 12, 12))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = 90, 90, 90, 255
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	flat := make([]float32, inLen)
	for i := range flat {
		flat[i] = 90
	}
	want := decodeResponse(t, post(t, s.Handler(), "application/json", jsonBody(t, map[string]any{"inputs": [][]float32{flat}}))).Outputs[0]
	got := decodeResponse(t, post(t, s.Handler(), "image/png", bytes.NewReader(buf.Bytes()))).Outputs[0]
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	fw, _ := mw.CreateFormFile("image", "gray.png")
	fw.Write(buf.Bytes())
	mw.Close()
	viaForm := decodeResponse(t, post(t, s.Handler(), mw.FormDataContentType(), &mp)).Outputs[0]
	for k := range want {
		if math.Abs(float64(got[k]-want[k])) > 1e-5 || viaForm[k] != got[k] {
			t.Fatalf("output %d: %g as JSON, %g as a PNG, %g as a form", k, want[k], got[k], viaForm[k])
		}
	}
}

// Every bad request gets its 4xx and a JSON error that says what was
// expected.
func TestBadRequests(t *testing.T) {
	cfg := baseConfig()
	cfg.MaxBody = 8 << 10
	cfg.MaxBatch = 4
	s := newServer(t, cfg)
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("image", "notes.txt")
	fw.Write([]byte("not an image at all"))
	mw.Close()
	one := "[[" + strings.Repeat("1,", inLen-1) + "1]]" // one flat sample
	cases := []struct {
		name, ct string
		body     io.Reader
		hdr      []string
		status   int
		says     string
	}{
		{"wrong shape", "application/json", jsonBody(t, map[string]any{"inputs": [][]float32{make([]float32, 35)}}), nil, 400, "expected shape [1, 6, 6]"},
		{"wrong nesting", "application/json", jsonBody(t, map[string]any{"inputs": []any{[][]float32{make([]float32, 6)}}}), nil, 400, "a number where a list of 6 was expected"},
		{"wrong dtype", "application/json", strings.NewReader(`{"inputs": [["a"` + strings.Repeat(",1", 35) + `]]}`), nil, 400, "must be numbers (float32); found the string"},
		{"null value", "application/json", strings.NewReader(`{"inputs": [[` + strings.Repeat("1,", 35) + `null]]}`), nil, 400, "must be numbers"},
		{"raw dtype", "application/octet-stream", bytes.NewReader(make([]byte, 8*inLen)), []string{"X-Pipe-Dtype", "float64"}, 400, "float32"},
		{"raw length", "application/octet-stream", bytes.NewReader(make([]byte, 4*inLen+2)), nil, 400, "144 bytes each"},
		{"raw shape header", "application/octet-stream", bytes.NewReader(make([]byte, 4*inLen)), []string{"X-Pipe-Shape", "1,6,6"}, 400, "expected 1,1,6,6"},
		{"not JSON", "application/json", strings.NewReader(`{"inputs": [1,`), nil, 400, "not a JSON prediction request"},
		{"unknown field", "application/json", strings.NewReader(`{"input": [[1]]}`), nil, 400, "unknown field"},
		{"no samples", "application/json", strings.NewReader(`{"inputs": []}`), nil, 400, "no samples"},
		{"trailing garbage", "application/json", strings.NewReader(`{"inputs": ` + one + `} xyz`), nil, 400, "goes on after the JSON request"},
		{"two objects", "application/json", strings.NewReader(`{"inputs": ` + one + `}{"inputs": ` + one + `}`), nil, 400, "goes on after the JSON request"},
		{"duplicate inputs", "application/json", strings.NewReader(`{"inputs": ` + one + `, "normalized": true, "inputs": ` + one + `}`), nil, 400, `"inputs" appears twice`},
		{"duplicate in another case", "application/json", strings.NewReader(`{"inputs": ` + one + `, "Inputs": ` + one + `}`), nil, 400, `"Inputs" appears twice`},
		{"too many samples", "application/json", jsonBody(t, map[string]any{"inputs": make([][]float32, 5)}), nil, 413, "at most 4"},
		{"oversized body", "application/octet-stream", bytes.NewReader(make([]byte, 9<<10)), nil, 413, "larger than the limit of 8192 bytes"},
		{"non-image upload", "image/png", strings.NewReader("plain text, not a picture"), nil, 415, "not an image"},
		{"non-image form file", mw.FormDataContentType(), &form, nil, 415, "not an image"},
		{"unknown content type", "text/csv", strings.NewReader("1,2,3"), nil, 415, "application/json, application/octet-stream"},
		{"no content type", "", strings.NewReader("{}"), nil, 415, "give one of"},
	}
	for _, c := range cases {
		w := post(t, s.Handler(), c.ct, c.body, c.hdr...)
		var eb errorBody
		if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil {
			t.Errorf("%s: the answer is not a JSON error: %v: %s", c.name, err, w.Body)
			continue
		}
		if w.Code != c.status || !strings.Contains(eb.Error, c.says) {
			t.Errorf("%s: %d %q, want %d saying %q", c.name, w.Code, eb.Error, c.status, c.says)
		}
		if fmt.Sprint(eb.Expected.InputShape) != "[1 6 6]" || eb.Expected.Dtype != "float32" || len(eb.Expected.ContentType) == 0 {
			t.Errorf("%s: the error does not say what was expected: %+v", c.name, eb.Expected)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/v1/predict", nil)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/predict: %d, want 405", w.Code)
	}
	n400 := 0
	for _, c := range cases {
		if c.status == 400 {
			n400++
		}
	}
	if got := counter(t, s, "pipe_serve_requests_total", "400"); got != float64(n400) {
		t.Errorf("requests_total{code=400} = %g, want %d", got, n400)
	}
}

// A gzip body is read as the body it compresses, held to the same limit
// once inflated; an encoding the server does not read is a 415, not a
// body misread as JSON.
func TestContentEncoding(t *testing.T) {
	cfg := baseConfig()
	cfg.MaxBody = 8 << 10
	s := newServer(t, cfg)
	gz := func(b []byte) io.Reader {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return &buf
	}
	plain, _ := json.Marshal(map[string]any{"inputs": [][]float32{sample(3)}})
	want := decodeResponse(t, post(t, s.Handler(), "application/json", bytes.NewReader(plain)))
	got := decodeResponse(t, post(t, s.Handler(), "application/json", gz(plain), "Content-Encoding", "gzip"))
	if fmt.Sprint(got.Outputs) != fmt.Sprint(want.Outputs) {
		t.Errorf("gzip body: %v, want %v", got.Outputs, want.Outputs)
	}
	// A bomb: under 1 KiB compressed, 1 MiB inflated.
	bomb := append([]byte(`{"inputs": [[`), bytes.Repeat([]byte(" "), 1<<20)...)
	for _, c := range []struct {
		name, enc string
		body      io.Reader
		status    int
		says      string
	}{
		{"bomb", "gzip", gz(bomb), 413, "larger than the limit of 8192 bytes"},
		{"not gzip", "gzip", bytes.NewReader(plain), 400, "not gzip"},
		{"brotli", "br", bytes.NewReader(plain), 415, `Content-Encoding "br" is not read here`},
	} {
		w := post(t, s.Handler(), "application/json", c.body, "Content-Encoding", c.enc)
		var eb errorBody
		json.Unmarshal(w.Body.Bytes(), &eb)
		if w.Code != c.status || !strings.Contains(eb.Error, c.says) {
			t.Errorf("%s: %d %q, want %d saying %q", c.name, w.Code, eb.Error, c.status, c.says)
		}
		if c.status == 415 && w.Header().Get("Accept-Encoding") != "gzip, identity" {
			t.Errorf("%s: Accept-Encoding %q", c.name, w.Header().Get("Accept-Encoding"))
		}
	}
}

// Requests that arrive together run as one batch: while the first
// request's batch runs, 15 more arrive, and they run as one batch of 15.
func TestBatchesFormUnderConcurrentLoad(t *testing.T) {
	cfg := baseConfig()
	cfg.MaxBatch, cfg.MaxWait = 16, 3*time.Second
	s, release, first := newGatedFirst(t, cfg)
	var wg sync.WaitGroup
	codes := make([]int, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = post(t, s.Handler(), "application/json", jsonBody(t, map[string]any{"inputs": [][]float32{sample(i)}})).Code
		}()
	}
	// The first batch holds the requests admitted when the worker woke (one,
	// or a few on a busy machine) and waits at the gate; every other request
	// queues behind it, to run as one batch once the gate opens.
	waitFor(t, func() bool {
		f := first.Load()
		return f > 0 && gauge(t, s, "pipe_serve_in_flight") == 16 && gauge(t, s, "pipe_serve_queue_depth") == float64(16-f)
	})
	release()
	wg.Wait()
	for i, c := range codes {
		if c != 200 {
			t.Fatalf("request %d: %d", i, c)
		}
	}
	h := histogram(t, s, "pipe_serve_batch_size")
	want := uint64(2) // the first batch, and the rest together
	if first.Load() == 16 {
		want = 1
	}
	if h.GetSampleSum() != 16 || h.GetSampleCount() != want {
		t.Fatalf("%d batches of %g samples in all (the first of %d): want 16 samples in %d batches", h.GetSampleCount(), h.GetSampleSum(), first.Load(), want)
	}
	// With batching off the same load runs one request at a time.
	cfg.Batching = false
	off := newServer(t, cfg)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			post(t, off.Handler(), "application/json", jsonBody(t, map[string]any{"inputs": [][]float32{sample(i)}}))
		}()
	}
	wg.Wait()
	if h := histogram(t, off, "pipe_serve_batch_size"); h.GetSampleCount() != 4 {
		t.Fatalf("batching off: %d batches for 4 requests", h.GetSampleCount())
	}
}

// Past the queue limit the server sheds load with 503 and Retry-After,
// and the admitted requests are still answered.
func TestShedsLoadPastTheQueue(t *testing.T) {
	cfg := baseConfig()
	cfg.MaxBatch, cfg.MaxWait, cfg.Queue = 64, 2*time.Second, 2
	s, release := newGated(t, cfg)
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = post(t, s.Handler(), "application/json", jsonBody(t, map[string]any{"inputs": [][]float32{sample(i)}})).Code
		}()
	}
	waitFor(t, func() bool { return gauge(t, s, "pipe_serve_in_flight") == 2 })
	w := post(t, s.Handler(), "application/json", jsonBody(t, map[string]any{"inputs": [][]float32{sample(9)}}))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "queue limit of 2") {
		t.Fatalf("past the queue: %d, Retry-After %q: %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	release()
	wg.Wait()
	if codes[0] != 200 || codes[1] != 200 {
		t.Fatalf("admitted requests: %v, want 200s", codes)
	}
}

// SIGTERM's path: with requests in flight, Serve's context ends; every
// one of them is answered with 200, readiness turns 503, and Serve
// returns nil.
func TestDrainAnswersInFlightRequests(t *testing.T) {
	cfg := baseConfig()
	cfg.MaxBatch, cfg.MaxWait = 64, 1500*time.Millisecond
	s, release := newGated(t, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()
	const n = 5
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(url+"/v1/predict", "application/json", jsonBody(t, map[string]any{"inputs": [][]float32{sample(i)}}))
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	waitFor(t, func() bool { return gauge(t, s, "pipe_serve_in_flight") == n })
	cancel()
	waitFor(t, func() bool { return s.draining.Load() })
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("readyz while draining: %d, want 503", w.Code)
	}
	release()
	wg.Wait()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	for i, c := range codes {
		if c != 200 {
			t.Errorf("in-flight request %d: %d, want 200", i, c)
		}
	}
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Error("the server still answers after draining")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func family(t *testing.T, s *Server, name string) *dto.MetricFamily {
	t.Helper()
	fams, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

func histogram(t *testing.T, s *Server, name string) *dto.Histogram {
	f := family(t, s, name)
	if f == nil || len(f.Metric) == 0 {
		return &dto.Histogram{}
	}
	return f.Metric[0].GetHistogram()
}

func gauge(t *testing.T, s *Server, name string) float64 {
	f := family(t, s, name)
	if f == nil || len(f.Metric) == 0 {
		return 0
	}
	return f.Metric[0].GetGauge().GetValue()
}

func counter(t *testing.T, s *Server, name, code string) float64 {
	f := family(t, s, name)
	if f == nil {
		return 0
	}
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if l.GetName() == "code" && l.GetValue() == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// Raw inputs get the training source's normalisation; inputs marked
// normalized do not.
func TestRawInputsAreNormalised(t *testing.T) {
	ws := load(t, 1, 8)
	ws[0].Info.InputNorm = dataset.Norm{Mean: []float64{0.5}, Std: []float64{2}}
	s, err := New(ws, baseConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Drain()
	ref := load(t, 1, 8)[0]
	defer ref.Close()
	x := sample(3)
	scaled := make([]float32, inLen)
	for i, v := range x {
		scaled[i] = (v - 0.5) / 2
	}
	for _, c := range []struct {
		normalized bool
		in         []float32
	}{{false, scaled}, {true, x}} {
		want := make([]float32, outLen)
		if err := ref.Predict(c.in, 1, want); err != nil {
			t.Fatal(err)
		}
		got := decodeResponse(t, post(t, s.Handler(), "application/json", jsonBody(t, map[string]any{"inputs": [][]float32{x}, "normalized": c.normalized}))).Outputs[0]
		for k := range want {
			if math.Abs(float64(got[k]-want[k])) > 1e-6 {
				t.Fatalf("normalized %v: output %d is %g, want %g", c.normalized, k, got[k], want[k])
			}
		}
	}
}
