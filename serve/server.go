package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"pipe/engine"
	"pipe/planner/plan"
	"pipe/run"
)

// Config is what the server is sized by; FromPlan reads it from a plan.
type Config struct {
	// MaxBatch is the most samples run together, and the most one
	// request may carry; MaxWait how long a batch's first request waits
	// for others. Batching false runs each request alone (the comparison
	// with batching off), whatever MaxBatch.
	MaxBatch int
	MaxWait  time.Duration
	Batching bool
	// Queue is the most requests admitted at once; MaxBody the largest
	// body read; Timeout bounds reading, answering and writing a request.
	Queue   int
	MaxBody int64
	Timeout time.Duration
	// MaxConns is the most connections Serve holds open at once (0:
	// DefaultMaxConns). A body is read before its request takes a queue
	// slot, so slow clients hold connections, not slots.
	MaxConns int
	// Grace is how long Serve goes on answering, with readiness off,
	// once its context ends, so that load balancers see /readyz turn 503
	// and stop sending before the listener closes (0: none).
	Grace time.Duration
	// MaxDecodePixels is the largest image, by its header, an image model
	// decodes, DecodeBytes the most one decode may hold (decodeCost), and
	// Decodes how many decode at once; a request waits for a slot within
	// its Timeout. An image model needs all three; FromPlan gives them.
	MaxDecodePixels int64
	DecodeBytes     int64
	Decodes         int
}

// DefaultGrace is the drain's grace period FromPlan gives: longer than
// a load balancer's usual readiness probe period, short enough for a
// pod's default termination grace of 30s.
const DefaultGrace = 5 * time.Second

// FromPlan is the configuration the plan's serving section gives, with
// batching on.
func FromPlan(s *plan.Serve) Config {
	return Config{
		MaxBatch: int(s.MaxBatch), MaxWait: seconds(s.MaxWaitSeconds), Batching: true,
		Queue: int(s.Queue), MaxBody: s.MaxBodyBytes, Timeout: seconds(s.TimeoutSeconds),
		MaxConns: DefaultMaxConns, Grace: DefaultGrace,
		MaxDecodePixels: s.MaxDecodePixels, DecodeBytes: s.DecodeBytes, Decodes: int(s.Decodes),
	}
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

// Server answers predictions with a set of workers, one model each.
// Create it with New, serve with Serve or Handler, stop it with Drain.
type Server struct {
	cfg     Config
	workers []*run.Trained
	info    run.TrainedInfo
	inLen   int
	outLen  int

	pending chan *job
	slots   chan struct{}
	// decodes holds one token for each image being decoded; decodeMem
	// keeps their memory within the plan's.
	decodes   chan struct{}
	decodeMem decodeMemory
	quit      chan struct{}
	done      sync.WaitGroup
	// draining turns readiness off (the drain has begun); stopping turns
	// predictions away (the HTTP server has stopped, or is not Serve's).
	draining atomic.Bool
	stopping atomic.Bool
	stopOnce sync.Once

	reg *prometheus.Registry
	m   metrics
	mux *http.ServeMux
	// gate, when set (by tests, before start), runs before each batch.
	gate func(n int)
	// after is time.After; tests replace it to end the grace at will.
	after func(time.Duration) <-chan time.Time

	// normalize is the first worker's input normalisation (the same for
	// every worker, and for a rebuilt one).
	normalize func(x []float32, n int)
	// down counts the workers lost and not yet rebuilt; workers[i] is
	// replaced by its own loop only, and read by Drain once the loops
	// have stopped.
	down    atomic.Int32
	rebuild func(old *run.Trained) (*run.Trained, error)
	log     io.Writer
}

// job is one request's samples on their way through a batch.
type job struct {
	ctx    context.Context
	x      []float32
	n      int
	out    []float32
	err    error
	queued time.Time
	done   chan struct{}
}

// Option is an optional knob of New.
type Option func(*Server)

// WithRebuild gives the server a way to rebuild a worker whose model
// failed with an error matching engine.ErrWorkerLost (its process died):
// rebuild takes the lost worker and returns a new one with the same
// weights. Without it a lost worker stays lost.
func WithRebuild(rebuild func(old *run.Trained) (*run.Trained, error)) Option {
	return func(s *Server) { s.rebuild = rebuild }
}

// WithLog sends the server's log lines (a worker lost, rebuilt) to w;
// by default they are dropped.
func WithLog(w io.Writer) Option {
	return func(s *Server) { s.log = w }
}

// New starts the workers' batching loops over the given models, which
// must be of one checkpoint and built for batches of at least
// cfg.MaxBatch samples. The server owns the models from then on: Drain
// closes them.
func New(workers []*run.Trained, cfg Config, opts ...Option) (*Server, error) {
	s, err := build(workers, cfg, opts...)
	if err != nil {
		return nil, err
	}
	s.start()
	return s, nil
}

// build makes the server without starting its workers.
func build(workers []*run.Trained, cfg Config, opts ...Option) (*Server, error) {
	if len(workers) == 0 {
		return nil, errors.New("serve: no workers")
	}
	if cfg.MaxBatch < 1 || cfg.Queue < 1 || cfg.MaxBody < 1 || cfg.Timeout <= 0 || cfg.MaxWait < 0 || cfg.MaxConns < 0 || cfg.Grace < 0 {
		return nil, fmt.Errorf("serve: max_batch %d, queue %d, body limit %d and timeout %v must be positive, max_wait %v, max connections %d and grace %v not negative",
			cfg.MaxBatch, cfg.Queue, cfg.MaxBody, cfg.Timeout, cfg.MaxWait, cfg.MaxConns, cfg.Grace)
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	for i, w := range workers {
		if w.Config.Batch < 1 {
			return nil, fmt.Errorf("serve: worker %d's model has no batch", i)
		}
	}
	info := workers[0].Info
	if sh := info.InputShape; len(sh) == 3 && (sh[0] == 1 || sh[0] == 3) && (cfg.MaxDecodePixels < 1 || cfg.DecodeBytes < 1 || cfg.Decodes < 1) {
		return nil, fmt.Errorf("serve: an image model needs a decode limit, the bytes a decode may hold and the decodes at once, all positive (the plan's serving section gives them); got %d pixels, %d bytes, %d decodes",
			cfg.MaxDecodePixels, cfg.DecodeBytes, cfg.Decodes)
	}
	s := &Server{
		cfg: cfg, workers: workers, info: info, normalize: workers[0].Normalize, log: io.Discard,
		inLen: int(numel(info.InputShape)), outLen: int(numel(info.OutputShape)),
		// Admission bounds what waits, so sending on pending never blocks.
		pending: make(chan *job, cfg.Queue),
		slots:   make(chan struct{}, cfg.Queue),
		decodes: make(chan struct{}, max(cfg.Decodes, 1)),
		quit:    make(chan struct{}),
		reg:     prometheus.NewRegistry(),
		after:   time.After,
	}
	for _, o := range opts {
		o(s)
	}
	s.m = newMetrics(s.reg, cfg.MaxBatch)
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/predict", s.predict)
	s.mux.HandleFunc("/v1/predict", s.wrongMethod)
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	s.mux.HandleFunc("/", s.notFound)
	return s, nil
}

func (s *Server) start() {
	for i := range s.workers {
		s.done.Add(1)
		go s.work(i)
	}
}

// Handler is the server's HTTP handler. Once the drain has begun its
// answers carry Connection: close, so that clients leave their
// keep-alive connections before Shutdown closes the idle ones (a request
// sent on one as it closes would be reset).
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		s.mux.ServeHTTP(w, r)
	})
}

// Registry is the server's metrics registry.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// HTTPServer is an http.Server for the handler with every timeout set
// from the configuration, so a slow client cannot hold a connection
// longer than Timeout (and its headers no longer than a tenth of it, at
// most 10s).
func (s *Server) HTTPServer(addr string) *http.Server {
	t := s.cfg.Timeout
	return &http.Server{
		Addr: addr, Handler: s.Handler(),
		ReadHeaderTimeout: min(t/10+time.Second, 10*time.Second),
		ReadTimeout:       t,
		// The answer is written after the request is read and run: room
		// for both.
		WriteTimeout:   2*t + time.Second,
		IdleTimeout:    2 * t,
		MaxHeaderBytes: 64 << 10,
	}
}

// Serve answers on ln, holding at most MaxConns connections open, until
// ctx is done, then drains: readiness turns 503 at once while requests
// are still answered for the Grace period; then the listener closes,
// every admitted request is answered (within the timeout), the workers
// stop and the models are closed. It returns nil after a clean drain.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ln = limitListen(ln, s.cfg.MaxConns)
	hs := s.HTTPServer(ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.Drain()
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	select {
	case <-s.after(s.cfg.Grace):
	case err := <-errc:
		s.Drain()
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*s.cfg.Timeout+time.Second)
	defer cancel()
	err := hs.Shutdown(sctx)
	<-errc
	s.Drain()
	return err
}

// Drain stops taking requests (readiness and predictions answer 503),
// lets the workers finish every queued request, stops them and closes
// the models. Call it after the HTTP server has stopped handing it
// requests (Serve does).
func (s *Server) Drain() {
	s.stopOnce.Do(func() {
		s.draining.Store(true)
		s.stopping.Store(true)
		close(s.quit)
		s.done.Wait()
		for _, w := range s.workers {
			w.Close()
		}
	})
}

// Back-off between attempts to rebuild a lost worker: it doubles from
// rebuildFirst up to rebuildMax.
const (
	rebuildFirst = 100 * time.Millisecond
	rebuildMax   = 30 * time.Second
)

// work is worker i's loop: serve batches until it stops, and rebuild
// the worker each time its model is lost.
func (s *Server) work(i int) {
	defer s.done.Done()
	for {
		err := s.batches(s.workers[i])
		if err == nil || !s.recoverWorker(i, err) {
			return
		}
	}
}

// batches serves batches with t until quit closes (nil) or t is lost
// (the error saying how): its process died, as a failed batch or its
// Liveness facet says.
func (s *Server) batches(t *run.Trained) error {
	var lost <-chan struct{}
	if l := t.Model.Capabilities().Liveness; l != nil {
		lost = l.Lost()
	}
	var carry *job
	x := make([]float32, 0, s.cfg.MaxBatch*s.inLen)
	for {
		first := carry
		carry = nil
		if first == nil {
			select {
			case first = <-s.pending:
			case <-lost:
				return fmt.Errorf("its worker process exited: %w", engine.ErrWorkerLost)
			case <-s.quit:
				// Every admitted request is queued before quit closes
				// (Serve shuts the HTTP server down first); answer what
				// is left.
				select {
				case first = <-s.pending:
				default:
					return nil
				}
			}
		}
		batch := []*job{first}
		n := first.n
		if s.cfg.Batching {
			timer := time.NewTimer(s.cfg.MaxWait)
		gather:
			for n < s.cfg.MaxBatch {
				// Wait only for requests admitted and not yet here (queued
				// behind, or about to be): alone, a request runs at once.
				if len(s.slots) <= len(batch) && len(s.pending) == 0 {
					break
				}
				select {
				case j := <-s.pending:
					if n+j.n > s.cfg.MaxBatch {
						carry = j
						break gather
					}
					batch = append(batch, j)
					n += j.n
				case <-timer.C:
					break gather
				}
			}
			timer.Stop()
		}
		if err := s.run(t, batch, x[:0]); errors.Is(err, engine.ErrWorkerLost) {
			if carry != nil {
				// Taken from pending, so there is room to put it back.
				s.pending <- carry
			}
			return err
		}
	}
}

// recoverWorker handles worker i's loss: readiness turns off, the log
// says so, and the worker is rebuilt with back-off until it answers a
// probe, when readiness turns back on. While no worker is up, queued
// requests are answered 503. It returns false when the server stops
// first.
func (s *Server) recoverWorker(i int, cause error) bool {
	old := s.workers[i]
	down := s.down.Add(1)
	fmt.Fprintf(s.log, "pipe serve: worker %d lost: %v; readiness off (%d of %d workers down), rebuilding it\n", i, cause, down, len(s.workers))
	old.Close()
	s.workers[i] = nil // closed; Drain skips it
	delay := rebuildFirst
	for attempt := 1; ; attempt++ {
		timer := time.NewTimer(delay)
	wait:
		for {
			// With every worker down, nobody else will run what is queued.
			var pending chan *job
			if int(s.down.Load()) == len(s.workers) {
				pending = s.pending
			}
			select {
			case j := <-pending:
				s.m.queueDepth.Sub(float64(j.n))
				j.err = cause
				close(j.done)
			case <-timer.C:
				break wait
			case <-s.quit:
				timer.Stop()
				return false
			}
		}
		if s.rebuild == nil {
			fmt.Fprintf(s.log, "pipe serve: worker %d cannot be rebuilt here (no rebuild given); it stays down\n", i)
			<-s.quit
			return false
		}
		t, err := s.rebuild(old)
		if err == nil {
			// Ready again only once it answers.
			err = s.predictWatched(t, make([]float32, s.inLen), 1, make([]float32, s.outLen))
			if err != nil {
				t.Close()
			}
		}
		if err == nil {
			s.workers[i] = t
			s.down.Add(-1)
			fmt.Fprintf(s.log, "pipe serve: worker %d rebuilt (attempt %d) and answering; %d of %d workers down\n", i, attempt, s.down.Load(), len(s.workers))
			return true
		}
		delay = min(2*delay, rebuildMax)
		fmt.Fprintf(s.log, "pipe serve: rebuilding worker %d failed (attempt %d): %v; next try in %v\n", i, attempt, err, delay)
	}
}

// run predicts one batch and answers its jobs; jobs whose client has gone
// are answered without being run. It returns the model's error.
func (s *Server) run(t *run.Trained, batch []*job, x []float32) error {
	start := time.Now()
	live := batch[:0:0]
	n := 0
	for _, j := range batch {
		s.m.queueDepth.Sub(float64(j.n))
		s.m.queueTime.Observe(start.Sub(j.queued).Seconds())
		if err := j.ctx.Err(); err != nil {
			j.err = err
			close(j.done)
			continue
		}
		live = append(live, j)
		x = append(x, j.x...)
		n += j.n
	}
	if n == 0 {
		return nil
	}
	if s.gate != nil {
		s.gate(n)
	}
	s.m.batchSize.Observe(float64(n))
	out := make([]float32, n*s.outLen)
	err := s.predictWatched(t, x, n, out)
	off := 0
	for _, j := range live {
		if err != nil {
			j.err = err
		} else {
			j.out = out[off*s.outLen : (off+j.n)*s.outLen]
		}
		off += j.n
		close(j.done)
	}
	return err
}

// predictWatched is t.Predict with a watchdog where t computes in a worker
// process (its Liveness facet): a worker that has not answered by
// hangAfter, when every request of the batch has had its 504, is taken
// for hung (stopped, deadlocked, a wedged device) and killed,
// so that the batch fails as a dead worker's does and the worker is
// rebuilt. A crash is seen at once by Lost; a hang only by the clock.
func (s *Server) predictWatched(t *run.Trained, x []float32, n int, out []float32) error {
	live := t.Model.Capabilities().Liveness
	if live == nil {
		return t.Predict(x, n, out)
	}
	var hung atomic.Bool
	dog := time.AfterFunc(s.hangAfter(), func() {
		hung.Store(true)
		live.Kill()
	})
	err := t.Predict(x, n, out)
	if !dog.Stop() && hung.Load() {
		if !errors.Is(err, engine.ErrWorkerLost) {
			err = engine.ErrWorkerLost
		}
		return fmt.Errorf("it did not answer a batch of %d within %v (past the request timeout), so it was killed: %w", n, s.hangAfter(), err)
	}
	return err
}

// hangAfter is how long a worker may take over a batch before it is taken
// for hung: a quarter past the request timeout, so that the batch's
// requests have had their 504 first, whatever the timers' order.
func (s *Server) hangAfter() time.Duration { return s.cfg.Timeout + s.cfg.Timeout/4 }

func numel(s []int64) int64 {
	n := int64(1)
	for _, d := range s {
		n *= d
	}
	return n
}
