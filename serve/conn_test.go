package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pipe/dataset"
	"pipe/engine"
	"pipe/engine/native"

	"pipe/run"
)

// The server's bounds on connections and bodies, its drain, and a lost
// worker's rebuild.

// A client that sends its headers and then stalls mid-body holds neither
// a worker nor, past the timeout, its connection.
func TestSlowClientTimesOut(t *testing.T) {
	cfg := baseConfig()
	cfg.Timeout = 300 * time.Millisecond
	s := newServer(t, cfg)
	hs := s.HTTPServer("127.0.0.1:0")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	defer hs.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", 4*inLen)
	conn.Write(make([]byte, 10))
	// Meanwhile another client is answered.
	raw := make([]byte, 4*inLen)
	resp, err := http.Post("http://"+ln.Addr().String()+"/v1/predict", "application/octet-stream", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the other client: %d", resp.StatusCode)
	}
	// The stalled one is cut off: its connection ends (with a 400 at
	// most) well before the test's own deadline.
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the stalled connection is still open after 10s (read %q)", b)
	}
	if strings.HasPrefix(string(b), "HTTP/1.1 200") {
		t.Fatalf("the stalled request was answered 200: %q", b)
	}
}

// serveOn starts s.Serve on a loopback port; it returns the base URL and
// a cancel that drains the server and waits for Serve's error.
func serveOn(t *testing.T, s *Server) (url string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	var once sync.Once
	var serr error
	stop = func() error {
		once.Do(func() {
			cancel()
			serr = <-served
		})
		return serr
	}
	t.Cleanup(func() { stop() })
	return "http://" + ln.Addr().String(), stop
}

// stallBody opens a connection, sends a prediction's headers and the
// first bytes of its body, and stalls there.
func stallBody(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", 4*inLen)
	if _, err := conn.Write(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// Clients that send their bodies slowly do not take queue slots: with 50
// of them stalled mid-body and a queue of 2, a normal request gets 200.
func TestSlowBodiesDoNotFillTheQueue(t *testing.T) {
	cfg := baseConfig()
	cfg.Queue = 2
	s := newServer(t, cfg)
	url, _ := serveOn(t, s)
	addr := strings.TrimPrefix(url, "http://")
	for range 50 {
		stallBody(t, addr)
	}
	// Every stalled request is being read, and none holds a slot.
	waitFor(t, func() bool { return gauge(t, s, "pipe_serve_reading") == 50 })
	if got := gauge(t, s, "pipe_serve_in_flight"); got != 0 {
		t.Errorf("%g requests admitted while their bodies are read, want 0", got)
	}
	resp, err := http.Post(url+"/v1/predict", "application/octet-stream", bytes.NewReader(make([]byte, 4*inLen)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a normal request behind 50 slow bodies: %d %s", resp.StatusCode, b)
	}
}

// Past MaxConns a connection waits to be accepted until another closes,
// and is then answered.
func TestConnectionLimit(t *testing.T) {
	cfg := baseConfig()
	cfg.MaxConns = 2
	s := newServer(t, cfg)
	url, _ := serveOn(t, s)
	addr := strings.TrimPrefix(url, "http://")
	a := stallBody(t, addr)
	stallBody(t, addr)
	waitFor(t, func() bool { return gauge(t, s, "pipe_serve_reading") == 2 })
	answered := make(chan int, 1)
	go func() {
		resp, err := http.Post(url+"/v1/predict", "application/octet-stream", bytes.NewReader(make([]byte, 4*inLen)))
		if err != nil {
			t.Error(err)
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	// The third connection is not accepted: its request is not read while
	// the two stalled ones hold their places.
	select {
	case code := <-answered:
		t.Fatalf("a third connection past a limit of 2 was answered %d", code)
	case <-time.After(300 * time.Millisecond):
	}
	if got := gauge(t, s, "pipe_serve_reading"); got != 2 {
		t.Errorf("%g requests being read past a limit of 2 connections", got)
	}
	a.Close()
	select {
	case code := <-answered:
		if code != http.StatusOK {
			t.Fatalf("the waiting connection: %d, want 200", code)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting connection was not answered after a place freed")
	}
}

// A body that stops arriving gets 408 once the timeout has passed since
// the request came.
func TestStalledBodyGets408(t *testing.T) {
	cfg := baseConfig()
	cfg.Timeout = 500 * time.Millisecond
	s := newServer(t, cfg)
	url, _ := serveOn(t, s)
	conn := stallBody(t, strings.TrimPrefix(url, "http://"))
	conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	b, _ := io.ReadAll(conn)
	if !strings.HasPrefix(string(b), "HTTP/1.1 408") || !strings.Contains(string(b), "did not arrive within the timeout") {
		t.Fatalf("a stalled body was answered %q, want 408", b)
	}
	if got := counter(t, s, "pipe_serve_requests_total", "408"); got != 1 {
		t.Errorf("requests_total{code=408} = %g, want 1", got)
	}
}

// SIGTERM's path with a grace period and clients on keep-alive
// connections: once Serve's context ends, /readyz answers 503 over the
// network while predictions are still answered; when the grace ends the
// listener closes and the requests admitted by then are answered. No
// client sees an error: no reset, no refused connection while it sends.
func TestDrainKeepsServingThroughGrace(t *testing.T) {
	cfg := baseConfig()
	cfg.Grace = time.Hour // ended by the test, through s.after
	s, err := build(load(t, 1, cfg.MaxBatch), cfg)
	if err != nil {
		t.Fatal(err)
	}
	graceEnd := make(chan time.Time)
	s.after = func(d time.Duration) <-chan time.Time {
		if d != time.Hour {
			t.Errorf("grace %v, want the configured hour", d)
		}
		return graceEnd
	}
	var hold atomic.Bool
	gate := make(chan struct{})
	s.gate = func(int) {
		if hold.Load() {
			<-gate
		}
	}
	s.start()
	t.Cleanup(func() {
		hold.Store(false)
		select {
		case <-gate:
		default:
			close(gate)
		}
		s.Drain()
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()
	predict := func(c *http.Client, i int) (int, error) {
		b, _ := json.Marshal(map[string]any{"inputs": [][]float32{sample(i)}})
		resp, err := c.Post(url+"/v1/predict", "application/json", bytes.NewReader(b))
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	// Clients on keep-alive connections send prediction after prediction.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var stopClients atomic.Bool
	var answered atomic.Int64
	var wg sync.WaitGroup
	const nClients = 20
	for i := range nClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stopClients.Load() {
				code, err := predict(client, i)
				if err != nil || code != http.StatusOK {
					t.Errorf("client %d: %d %v", i, code, err)
					return
				}
				answered.Add(1)
			}
		}()
	}
	waitFor(t, func() bool { return answered.Load() >= nClients })

	cancel() // SIGTERM
	waitFor(t, func() bool {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			t.Fatalf("/readyz during the grace: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	// Still serving: the clients go on being answered, a new one too.
	n := answered.Load()
	waitFor(t, func() bool { return answered.Load() >= n+nClients })
	if code, err := predict(http.DefaultClient, 99); err != nil || code != http.StatusOK {
		t.Fatalf("a prediction during the grace: %d %v", code, err)
	}
	stopClients.Store(true)
	wg.Wait()

	// Requests admitted as the grace ends are answered after the
	// listener has closed.
	hold.Store(true)
	const nLate = 5
	late := make([]int, nLate)
	lateErr := make([]error, nLate)
	for i := range nLate {
		wg.Add(1)
		go func() {
			defer wg.Done()
			late[i], lateErr[i] = predict(client, i)
		}()
	}
	waitFor(t, func() bool { return gauge(t, s, "pipe_serve_in_flight") == nLate })
	close(graceEnd)
	waitFor(t, func() bool {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	hold.Store(false)
	close(gate)
	wg.Wait()
	for i := range nLate {
		if lateErr[i] != nil || late[i] != http.StatusOK {
			t.Errorf("request %d admitted before the listener closed: %d %v", i, late[i], lateErr[i])
		}
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// dyingModel is a model whose worker process can be killed: from then on
// Eval fails as a dead torch worker's does and, when it is watched, its
// Liveness facet's Lost is closed.
type dyingModel struct {
	engine.Model
	watched bool
	lost    chan struct{}
	once    sync.Once
	dead    atomic.Bool
}

func (m *dyingModel) kill() {
	m.dead.Store(true)
	if m.watched {
		m.once.Do(func() { close(m.lost) })
	}
}

func (m *dyingModel) Eval(b *dataset.Batch, out []float32) (float64, error) {
	if m.dead.Load() {
		return 0, fmt.Errorf("the torch worker of rank 0 (pid 1) died: signal: killed: %w", engine.ErrWorkerLost)
	}
	return m.Model.Eval(b, out)
}

func (m *dyingModel) Capabilities() engine.Capabilities {
	c := m.Model.Capabilities()
	if m.watched {
		c.Liveness = m
	}
	return c
}

func (m *dyingModel) Lost() <-chan struct{} { return m.lost }

func (m *dyingModel) Kill() { m.kill() }

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A worker whose process dies is noticed at once (watched: with no
// request; unwatched: by the batch that fails), logged, and rebuilt with
// back-off and the same weights: meanwhile /readyz and predictions answer
// 503 with Retry-After, not 200 and 500, and readiness comes back once
// the rebuilt worker answers.
func TestLostWorkerIsRebuilt(t *testing.T) {
	for _, watched := range []bool{true, false} {
		t.Run(fmt.Sprintf("watched=%v", watched), func(t *testing.T) {
			cfg := baseConfig()
			ws := load(t, 1, cfg.MaxBatch)
			dm := &dyingModel{Model: ws[0].Model, watched: watched, lost: make(chan struct{})}
			ws[0].Model = dm
			var log syncBuffer
			allow := make(chan bool)
			var attempts atomic.Int32
			s, err := build(ws, cfg, WithLog(&log), WithRebuild(func(old *run.Trained) (*run.Trained, error) {
				attempts.Add(1)
				if !<-allow {
					return nil, fmt.Errorf("torch: the worker did not start")
				}
				return old.Rebuild(native.Backend{})
			}))
			if err != nil {
				t.Fatal(err)
			}
			var hold atomic.Bool
			gate := make(chan struct{})
			s.gate = func(int) {
				if hold.Load() {
					<-gate
				}
			}
			s.start()
			t.Cleanup(s.Drain)
			h := s.Handler()
			req := func() *httptest.ResponseRecorder {
				return post(t, h, "application/json", jsonBody(t, map[string]any{"inputs": [][]float32{sample(7)}}))
			}
			readyz := func() int {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
				return w.Code
			}
			before := decodeResponse(t, req())

			if watched {
				dm.kill()
			} else {
				// A request in flight when the worker dies.
				hold.Store(true)
				answer := make(chan *httptest.ResponseRecorder, 1)
				go func() { answer <- req() }()
				waitFor(t, func() bool { return gauge(t, s, "pipe_serve_in_flight") == 1 })
				dm.kill()
				hold.Store(false)
				close(gate)
				if w := <-answer; w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
					t.Fatalf("the request in flight as the worker died: %d, Retry-After %q: %s", w.Code, w.Header().Get("Retry-After"), w.Body)
				}
			}
			waitFor(t, func() bool { return strings.Contains(log.String(), "worker 0 lost") })
			if !strings.Contains(log.String(), "rank 0") && !strings.Contains(log.String(), "exited") {
				t.Errorf("the log does not say how the worker was lost: %s", log.String())
			}
			if c := readyz(); c != http.StatusServiceUnavailable {
				t.Errorf("/readyz with the worker lost: %d, want 503", c)
			}
			if w := req(); w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "being restarted") {
				t.Errorf("a request with the worker lost: %d, Retry-After %q: %s", w.Code, w.Header().Get("Retry-After"), w.Body)
			}

			allow <- false // the first rebuild fails: it is tried again
			allow <- true
			waitFor(t, func() bool { return readyz() == http.StatusOK })
			if n := attempts.Load(); n != 2 {
				t.Errorf("%d rebuild attempts, want 2", n)
			}
			if l := log.String(); !strings.Contains(l, "rebuilding worker 0 failed (attempt 1)") || !strings.Contains(l, "worker 0 rebuilt (attempt 2)") {
				t.Errorf("the log does not tell the rebuild:\n%s", l)
			}
			after := decodeResponse(t, req())
			if fmt.Sprint(after.Outputs) != fmt.Sprint(before.Outputs) {
				t.Errorf("the rebuilt worker answers %v, before its loss %v", after.Outputs, before.Outputs)
			}
		})
	}
}

// hungModel is a model whose worker process can be stopped (SIGSTOP):
// from then on Eval waits until the process is killed, and then fails
// as a dead torch worker's does.
type hungModel struct {
	engine.Model
	stopped atomic.Bool
	killed  chan struct{}
	once    sync.Once
}

func (m *hungModel) Eval(b *dataset.Batch, out []float32) (float64, error) {
	if m.stopped.Load() {
		<-m.killed
		return 0, fmt.Errorf("the torch worker of rank 0 (pid 1) died: signal: killed: %w", engine.ErrWorkerLost)
	}
	return m.Model.Eval(b, out)
}

func (m *hungModel) Capabilities() engine.Capabilities {
	c := m.Model.Capabilities()
	c.Liveness = m
	return c
}

func (m *hungModel) Lost() <-chan struct{} { return m.killed }
func (m *hungModel) Kill()                 { m.once.Do(func() { close(m.killed) }) }

// A worker that stops answering (SIGSTOP, a deadlock) is found by the
// clock: once a batch has gone unanswered for the request timeout (its
// requests have had their 504), the worker is killed, the log says why,
// and it is rebuilt, as a dead one is; before, every request timed out
// with /readyz 200 and no word in the log.
func TestHungWorkerIsKilledAndRebuilt(t *testing.T) {
	cfg := baseConfig()
	cfg.Timeout = 400 * time.Millisecond
	ws := load(t, 1, cfg.MaxBatch)
	hm := &hungModel{Model: ws[0].Model, killed: make(chan struct{})}
	ws[0].Model = hm
	var log syncBuffer
	s, err := build(ws, cfg, WithLog(&log), WithRebuild(func(old *run.Trained) (*run.Trained, error) {
		return old.Rebuild(native.Backend{})
	}))
	if err != nil {
		t.Fatal(err)
	}
	s.start()
	t.Cleanup(s.Drain)
	t.Cleanup(hm.Kill) // first: a worker still hung would hold Drain
	h := s.Handler()
	req := func() *httptest.ResponseRecorder {
		return post(t, h, "application/json", jsonBody(t, map[string]any{"inputs": [][]float32{sample(7)}}))
	}
	readyz := func() int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return w.Code
	}
	before := decodeResponse(t, req())
	hm.stopped.Store(true)
	if w := req(); w.Code != http.StatusGatewayTimeout {
		t.Fatalf("a request to the hung worker: %d, want 504: %s", w.Code, w.Body)
	}
	waitFor(t, func() bool { return strings.Contains(log.String(), "worker 0 lost") })
	if l := log.String(); !strings.Contains(l, "did not answer a batch of 1 within 500ms") || !strings.Contains(l, "killed") {
		t.Errorf("the log does not say the worker hung and was killed:\n%s", l)
	}
	waitFor(t, func() bool { return strings.Contains(log.String(), "worker 0 rebuilt") && readyz() == http.StatusOK })
	after := decodeResponse(t, req())
	if fmt.Sprint(after.Outputs) != fmt.Sprint(before.Outputs) {
		t.Errorf("the rebuilt worker answers %v, before it hung %v", after.Outputs, before.Outputs)
	}
}
