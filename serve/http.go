package serve

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"pipe/engine"
)

// Accepted is what POST /v1/predict reads, as its errors say.
var Accepted = []string{"application/json", "application/octet-stream", "image/png", "image/jpeg", "multipart/form-data"}

// apiError is a 4xx or 5xx answer: what went wrong and what was expected.
type apiError struct {
	status int
	msg    string
	// expected is filled in by the server: the input shape and the
	// accepted types.
	retry bool
}

func (e *apiError) Error() string { return e.msg }

func badRequest(status int, format string, args ...any) *apiError {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

// errorBody is the JSON of an error answer.
type errorBody struct {
	Error    string   `json:"error"`
	Expected expected `json:"expected"`
}

type expected struct {
	InputShape  []int64  `json:"input_shape"`
	Dtype       string   `json:"dtype"`
	MaxSamples  int      `json:"max_samples"`
	MaxBody     int64    `json:"max_body_bytes"`
	ContentType []string `json:"content_types"`
}

// Response is the JSON answer of POST /v1/predict: each sample's outputs
// (flat, in the model's output shape) and, for a classifier, its class,
// the class's name and the probabilities.
type Response struct {
	OutputShape []int64      `json:"output_shape"`
	Outputs     [][]float32  `json:"outputs"`
	Predictions []Prediction `json:"predictions,omitempty"`
}

// Prediction is one sample's class.
type Prediction struct {
	Class         int       `json:"class"`
	Name          string    `json:"name,omitempty"`
	Probabilities []float32 `json:"probabilities"`
}

func (s *Server) writeError(w http.ResponseWriter, e *apiError) {
	if e.retry {
		w.Header().Set("Retry-After", "1")
	}
	s.writeJSON(w, e.status, errorBody{Error: e.msg, Expected: expected{
		InputShape: s.info.InputShape, Dtype: "float32", MaxSamples: s.cfg.MaxBatch, MaxBody: s.cfg.MaxBody, ContentType: Accepted,
	}})
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	s.writeJSON(w, http.StatusOK, map[string]string{"status": "alive"})
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if s.draining.Load() {
		s.writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
		return
	}
	if down := int(s.down.Load()); down > 0 {
		w.Header().Set("Retry-After", "1")
		s.writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "worker lost, rebuilding", "workers": len(s.workers), "workers_down": down})
		return
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "model": s.info.ModelName, "pipeline": s.info.Pipeline, "workers": len(s.workers)})
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, badRequest(http.StatusNotFound, "no endpoint %s %s: POST /v1/predict, GET /healthz, /readyz, /metrics", r.Method, r.URL.Path))
}

func (s *Server) wrongMethod(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "POST")
	s.writeError(w, badRequest(http.StatusMethodNotAllowed, "%s /v1/predict: predictions are POSTed", r.Method))
}

// predict is POST /v1/predict: read, admit, queue, wait, answer.
func (s *Server) predict(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	code := http.StatusOK
	defer func() {
		s.m.requests.WithLabelValues(strconv.Itoa(code)).Inc()
		s.m.latency.Observe(time.Since(start).Seconds())
	}()
	fail := func(e *apiError) {
		code = e.status
		s.writeError(w, e)
	}
	if s.stopping.Load() {
		fail(&apiError{status: http.StatusServiceUnavailable, msg: "the server is shutting down", retry: true})
		return
	}
	// Read the whole body before taking a queue slot: a client that sends
	// slowly holds its connection (bounded by MaxConns) and never a slot,
	// so slow clients cannot turn prompt ones away with 503. Reading is
	// bounded by MaxBody and by a deadline of Timeout from arrival (408).
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	_ = http.NewResponseController(w).SetReadDeadline(start.Add(s.cfg.Timeout))
	s.m.reading.Inc()
	x, n, raw, e := s.readBody(ctx, w, r)
	s.m.reading.Dec()
	if e != nil {
		fail(e)
		return
	}
	select {
	case s.slots <- struct{}{}:
	default:
		fail(&apiError{status: http.StatusServiceUnavailable, msg: fmt.Sprintf("the server is at its queue limit of %d requests; retry later", s.cfg.Queue), retry: true})
		return
	}
	s.m.inFlight.Inc()
	defer func() {
		<-s.slots
		s.m.inFlight.Dec()
	}()
	if int(s.down.Load()) == len(s.workers) {
		fail(s.lostError())
		return
	}
	if raw {
		s.normalize(x, n)
	}
	j := &job{ctx: ctx, x: x, n: n, queued: time.Now(), done: make(chan struct{})}
	s.m.queueDepth.Add(float64(n))
	s.pending <- j
	select {
	case <-j.done:
	case <-ctx.Done():
		fail(&apiError{status: http.StatusGatewayTimeout, msg: fmt.Sprintf("no answer within the timeout of %v", s.cfg.Timeout), retry: true})
		return
	}
	if j.err != nil {
		if errors.Is(j.err, context.Canceled) || errors.Is(j.err, context.DeadlineExceeded) {
			fail(&apiError{status: http.StatusServiceUnavailable, msg: "the request ended before its batch ran", retry: true})
			return
		}
		if errors.Is(j.err, engine.ErrWorkerLost) {
			fail(s.lostError())
			return
		}
		fail(badRequest(http.StatusInternalServerError, "the model failed: %v", j.err))
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "application/octet-stream") {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("X-Pipe-Shape", shapeHeader(append([]int64{int64(n)}, s.info.OutputShape...)))
		buf := make([]byte, 4*len(j.out))
		for i, v := range j.out {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		_, _ = w.Write(buf)
		return
	}
	s.writeJSON(w, http.StatusOK, s.response(j.out, n))
}

// readBody reads and decodes a prediction's body, held to MaxBody once
// any Content-Encoding is undone; an image waits within ctx for a decode
// slot.
func (s *Server) readBody(ctx context.Context, w http.ResponseWriter, r *http.Request) ([]float32, int, bool, *apiError) {
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
	defer r.Body.Close()
	if e := s.decodeEncoding(w, r); e != nil {
		return nil, 0, false, e
	}
	return s.decode(ctx, r)
}

// lostError answers a request that no worker can run: the model's
// worker process died and is being rebuilt.
func (s *Server) lostError() *apiError {
	return &apiError{status: http.StatusServiceUnavailable, retry: true,
		msg: "the model's worker process was lost and is being restarted; retry later"}
}

// response shapes n samples' outputs; a cross-entropy classifier's
// samples also get their class and probabilities (a softmax of the
// outputs).
func (s *Server) response(out []float32, n int) Response {
	res := Response{OutputShape: s.info.OutputShape, Outputs: make([][]float32, n)}
	o := s.outLen
	for i := range n {
		res.Outputs[i] = out[i*o : (i+1)*o]
	}
	if s.info.Loss != "cross_entropy" || len(s.info.OutputShape) != 1 {
		return res
	}
	res.Predictions = make([]Prediction, n)
	for i, v := range res.Outputs {
		p := Prediction{Probabilities: softmax(v)}
		for k, q := range p.Probabilities {
			if q > p.Probabilities[p.Class] {
				p.Class = k
			}
		}
		if p.Class < len(s.info.ClassNames) {
			p.Name = s.info.ClassNames[p.Class]
		}
		res.Predictions[i] = p
	}
	return res
}

func softmax(v []float32) []float32 {
	out := make([]float32, len(v))
	m := float32(math.Inf(-1))
	for _, x := range v {
		m = max(m, x)
	}
	var sum float64
	for i, x := range v {
		e := math.Exp(float64(x - m))
		out[i] = float32(e)
		sum += e
	}
	for i := range out {
		out[i] = float32(float64(out[i]) / sum)
	}
	return out
}

func shapeHeader(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return strings.Join(parts, ",")
}
