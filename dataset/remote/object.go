package remote

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Object is one object of a store, opened by URL: its size, and reads of
// its bytes through the shared block cache.
type Object struct {
	id   int
	loc  *location
	st   store
	size int64
	set  Settings
}

// The process's objects, by URL and endpoint, so that every handle GDAL
// opens on one object, the direct reader and plan's header reads share
// its cached blocks; and by id, for GDAL's paths (Path).
var (
	regMu  sync.Mutex
	byKey  = map[string]*Object{}
	byID   = map[int]*Object{}
	nextID = 1
)

// Open opens the object at URL u: a HEAD request (retried as reads are)
// gives its size. The process keeps it, so opening it again costs no
// request; its blocks stay in the cache while the budget allows.
func Open(ctx context.Context, u string) (*Object, error) {
	loc, err := parse(u)
	if err != nil {
		return nil, err
	}
	s, err := FromEnv()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", loc.shown, err)
	}
	return openLoc(ctx, loc, s)
}

// OpenWith is Open with settings other than the environment's (tests,
// benchmarks).
func OpenWith(ctx context.Context, u string, s Settings) (*Object, error) {
	loc, err := parse(u)
	if err != nil {
		return nil, err
	}
	return openLoc(ctx, loc, s)
}

func storeFor(loc *location) (store, error) {
	switch loc.scheme {
	case "s3":
		return newS3("s3")
	case "gs":
		if firstEnv("GS_ACCESS_KEY_ID") == "" {
			return plainHTTP, nil // public objects, at their https:// address
		}
		return newS3("gs")
	}
	return plainHTTP, nil
}

// anonymous is loc as it is read without keys: a gs:// object at its
// https:// address, a public object; loc itself otherwise.
func anonymous(loc *location) (*location, error) {
	if loc.scheme != "gs" || firstEnv("GS_ACCESS_KEY_ID") != "" {
		return loc, nil
	}
	host, secure, err := gsEndpoint()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", loc.shown, err)
	}
	c := *loc
	c.scheme = map[bool]string{true: "https", false: "http"}[secure]
	c.raw = c.scheme + "://" + host + "/" + loc.bucket + "/" + loc.key
	c.key = "/" + loc.bucket + "/" + loc.key
	return &c, nil
}

func openLoc(ctx context.Context, loc *location, s Settings) (*Object, error) {
	loc, err := anonymous(loc)
	if err != nil {
		return nil, err
	}
	st, err := storeFor(loc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", loc.shown, err)
	}
	key := st.where() + "|" + loc.raw
	regMu.Lock()
	if o, ok := byKey[key]; ok {
		regMu.Unlock()
		return o, nil
	}
	regMu.Unlock()
	o := &Object{loc: loc, st: st, set: s}
	var size int64
	err = o.retry(ctx, "reading its size", func(ctx context.Context) error {
		var err error
		size, err = st.size(ctx, loc)
		return err
	})
	if err != nil {
		return nil, err
	}
	o.size = size
	regMu.Lock()
	defer regMu.Unlock()
	if p, ok := byKey[key]; ok {
		return p, nil
	}
	o.id = nextID
	nextID++
	byKey[key], byID[o.id] = o, o
	return o, nil
}

// Lookup is the object Path named, or nil.
func Lookup(path string) *Object {
	id, _, _ := strings.Cut(path, "/")
	n, err := strconv.Atoi(id)
	if err != nil {
		return nil
	}
	regMu.Lock()
	defer regMu.Unlock()
	return byID[n]
}

// Path names the object in a file system that serves objects by Lookup
// (GDAL's /vsipipe/): its id, then its base name, which GDAL's drivers may
// look at.
func (o *Object) Path() string {
	base := o.loc.key
	if i := strings.LastIndexAny(base, "/?"); i >= 0 && !strings.Contains(base[i:], "?") {
		base = base[i+1:]
	}
	if base == "" || strings.ContainsAny(base, "?&=") {
		base = "object"
	}
	return strconv.Itoa(o.id) + "/" + base
}

// Size is the object's length in bytes.
func (o *Object) Size() int64 { return o.size }

// URL is the object's URL as diagnostics show it (Redact).
func (o *Object) URL() string { return o.loc.shown }

// Close does nothing: the process keeps its objects, whose blocks the
// cache's budget bounds. It lets an Object stand where a file did.
func (o *Object) Close() error { return nil }

// Child opens the object at rel under o's URL taken as a folder (a Zarr
// array's .zarray or chunk), with o's settings; its size is not asked.
func (o *Object) Child(rel string) *Object {
	return &Object{loc: o.loc.child(rel), st: o.st, size: -1, set: o.set}
}

// OpenFolder is a handle on the folder at URL u, for Child: no request
// is made.
func OpenFolder(u string) (*Object, error) {
	loc, err := parse(u)
	if err == nil {
		loc, err = anonymous(loc)
	}
	if err != nil {
		return nil, err
	}
	st, err := storeFor(loc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", loc.shown, err)
	}
	set, err := FromEnv()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", loc.shown, err)
	}
	return &Object{loc: loc, st: st, size: -1, set: set}, nil
}

// ReadAll reads the whole object in one request (retried), bypassing the
// block cache: a Zarr chunk is read once. A missing object is an error
// that errors.Is(err, ErrNotFound) tells apart.
func (o *Object) ReadAll(ctx context.Context) ([]byte, error) {
	var b []byte
	err := o.retry(ctx, "reading the object", func(ctx context.Context) error {
		var err error
		b, err = o.st.get(ctx, o.loc, 0, -1)
		return err
	})
	if err == nil {
		stats.bytes.Add(int64(len(b)))
	}
	return b, err
}

// ErrNotFound is wrapped by the error of a read of a missing object.
var ErrNotFound = errNotFound

// ErrDenied is wrapped by the error of a denied request.
var ErrDenied = errDenied

// retry runs req until it succeeds, fails for good or has failed
// 1+Retries times, waiting Backoff·2^(try−1) (at most 16×, ±25%) between
// tries; what says what was done ("reading its size"), for the error.
func (o *Object) retry(ctx context.Context, what string, req func(ctx context.Context) error) error {
	var err error
	for try := 0; try <= o.set.Retries; try++ {
		if try > 0 {
			stats.retries.Add(1)
			d := o.set.Backoff << min(try-1, 4)
			d = time.Duration(float64(d) * (0.75 + 0.5*rand.Float64()))
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return fmt.Errorf("%s: %s: %w", o.loc.shown, what, ctx.Err())
			}
		}
		stats.requests.Add(1)
		rctx, cancel := context.WithTimeout(ctx, o.set.Timeout)
		err = req(rctx)
		if err != nil && rctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			err = &timeoutError{o.set.Timeout, err}
		}
		cancel()
		if err == nil {
			return nil
		}
		stats.failures.Add(1)
		switch {
		case errors.Is(err, errNotFound):
			return fmt.Errorf("%s: %w", o.loc.shown, err)
		case errors.Is(err, errDenied):
			return fmt.Errorf("%s: %w: check the credentials in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE) and the bucket's policy", o.loc.shown, err)
		case !retryable(err):
			return fmt.Errorf("%s: %s: %w", o.loc.shown, what, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("%s: %s: gave up after %d tries: %w", o.loc.shown, what, o.set.Retries+1, err)
}

// timeoutError is a request cut off at Settings.Timeout; it says the
// timeout and the variable that sets it.
type timeoutError struct {
	d   time.Duration
	err error
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("no complete answer within %v (PIPE_REMOTE_TIMEOUT)", e.d)
}

func (e *timeoutError) Unwrap() error { return e.err }

// ReadAt reads len(p) bytes from off through the block cache; at the
// object's end it returns what there is and io.EOF.
func (o *Object) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: read at negative offset %d", o.loc.shown, off)
	}
	if off >= o.size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), o.size-off)
	blocks, err := shared.blocks(o, off, want, true)
	if err != nil {
		return 0, err
	}
	n := 0
	bs := o.set.BlockBytes
	for _, e := range blocks {
		start := e.key.idx * bs
		lo := max(off, start) - start
		hi := min(off+want, start+int64(len(e.data))) - start
		n += copy(p[n:], e.data[lo:hi])
	}
	if int64(n) < int64(len(p)) {
		return n, io.EOF
	}
	return n, nil
}

// Prefetch starts reading the blocks of [off, off+n) into the cache and
// returns at once; a later ReadAt waits for them. Errors are left to that
// ReadAt, which tries again.
func (o *Object) Prefetch(off, n int64) {
	if off < 0 || off >= o.size || n <= 0 {
		return
	}
	n = min(n, o.size-off)
	shared.blocks(o, off, n, false)
}

// ---- the block cache ----------------------------------------------------

type blockKey struct {
	obj *Object
	idx int64
}

type entry struct {
	key  blockKey
	data []byte
	err  error
	done chan struct{}
	elem *list.Element // in the LRU once done and kept
}

// cache holds blocks of every object, least recently used first out,
// within a byte budget. A block being fetched is in the map with its done
// channel open; readers that need it wait on that.
type cache struct {
	mu     sync.Mutex
	m      map[blockKey]*entry
	lru    list.List
	used   int64
	budget int64
	sem    chan struct{} // bounds the prefetches in flight
}

var shared = &cache{m: map[blockKey]*entry{}, budget: -1, sem: make(chan struct{}, 32)}

// maxRun is the most bytes one request fetches.
const maxRun = 8 << 20

// blocks returns the entries covering [off, off+n) of o, fetching those
// the cache lacks (a run of consecutive missing blocks is one request)
// and, with wait, waiting for all of them; without wait it returns nil
// as soon as the fetches are started.
func (c *cache) blocks(o *Object, off, n int64, wait bool) ([]*entry, error) {
	bs := o.set.BlockBytes
	b0, b1 := off/bs, (off+n-1)/bs
	es := make([]*entry, 0, b1-b0+1)
	type run struct{ first, last int64 }
	var runs []run
	if !wait {
		// A prefetch takes a slot first, so that at most cap(sem) of them
		// are in flight; when none is free the blocks are left to their
		// reader.
		select {
		case c.sem <- struct{}{}:
		default:
			return nil, nil
		}
	}
	c.mu.Lock()
	if c.budget < 0 {
		c.budget = o.set.CacheBytes
	}
	for b := b0; b <= b1; b++ {
		k := blockKey{o, b}
		e, ok := c.m[k]
		if ok {
			if e.elem != nil {
				c.lru.MoveToBack(e.elem)
			}
			stats.hits.Add(1)
		} else {
			e = &entry{key: k, done: make(chan struct{})}
			c.m[k] = e
			stats.misses.Add(1)
			if l := len(runs) - 1; l >= 0 && runs[l].last == b-1 && (b-runs[l].first+1)*bs <= maxRun {
				runs[l].last = b
			} else {
				runs = append(runs, run{b, b})
			}
		}
		es = append(es, e)
	}
	c.mu.Unlock()
	if !wait {
		go func() {
			defer func() { <-c.sem }()
			for _, r := range runs {
				c.fetch(o, es[r.first-b0:r.last-b0+1])
			}
		}()
		return nil, nil
	}
	for i, r := range runs {
		if i == len(runs)-1 {
			c.fetch(o, es[r.first-b0:r.last-b0+1])
		} else {
			go c.fetch(o, es[r.first-b0:r.last-b0+1])
		}
	}
	t0 := time.Now()
	var err error
	for _, e := range es {
		<-e.done
		if e.err != nil && err == nil {
			err = e.err
		}
	}
	stats.waitNanos.Add(int64(time.Since(t0)))
	return es, err
}

// fetch reads the run of blocks es (consecutive, all missing) in one
// request and completes them.
func (c *cache) fetch(o *Object, es []*entry) {
	bs := o.set.BlockBytes
	off := es[0].key.idx * bs
	end := min((es[len(es)-1].key.idx+1)*bs, o.size)
	var b []byte
	err := o.retry(context.Background(), fmt.Sprintf("reading bytes %d to %d", off, end-1), func(ctx context.Context) error {
		var err error
		b, err = o.st.get(ctx, o.loc, off, end-off)
		return err
	})
	if err == nil {
		stats.bytes.Add(int64(len(b)))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range es {
		if err != nil {
			e.err = err
			delete(c.m, e.key) // the next reader tries again
			close(e.done)
			continue
		}
		lo := int64(i) * bs
		e.data = b[lo:min(lo+bs, int64(len(b))):min(lo+bs, int64(len(b)))]
		close(e.done)
		if c.budget < int64(len(e.data)) {
			delete(c.m, e.key)
			continue
		}
		e.elem = c.lru.PushBack(e)
		c.used += int64(len(e.data))
	}
	for c.used > c.budget && c.lru.Len() > 0 {
		old := c.lru.Remove(c.lru.Front()).(*entry)
		old.elem = nil
		delete(c.m, old.key)
		c.used -= int64(len(old.data))
	}
}

// CacheBytes is the block cache's budget: what an opened remote source
// may hold in memory beside the rest (pipe plan counts it).
func CacheBytes() int64 {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.budget >= 0 {
		return shared.budget
	}
	s, _ := FromEnv() // a bad variable fails the source's open
	return s.CacheBytes
}

// Flush empties the block cache, keeping the objects (a benchmark's cold
// pass).
func Flush() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	for k, e := range shared.m {
		if e.elem != nil { // done and kept; fetches in flight finish
			shared.lru.Remove(e.elem)
			delete(shared.m, k)
		}
	}
	shared.used = 0
}

// Reset empties the block cache, forgets every object and sets the cache's
// budget (negative: the next object's setting): for tests and benchmarks
// that run several servers or settings in one process.
func Reset(budget int64) {
	regMu.Lock()
	byKey, byID = map[string]*Object{}, map[int]*Object{}
	regMu.Unlock()
	shared.mu.Lock()
	shared.m = map[blockKey]*entry{}
	shared.lru.Init()
	shared.used, shared.budget = 0, budget
	shared.mu.Unlock()
}

// ---- statistics ---------------------------------------------------------

var stats struct {
	requests, retries, failures, bytes, hits, misses, waitNanos atomic.Int64
}

// Stats are the process's remote reads so far.
type Stats struct {
	Requests int64         `json:"requests"` // sent, retries included
	Retries  int64         `json:"retries"`
	Failures int64         `json:"failures"` // requests that failed, retried or not
	Bytes    int64         `json:"bytes"`    // received
	Hits     int64         `json:"block_hits"`
	Misses   int64         `json:"block_misses"`
	Wait     time.Duration `json:"wait_ns"` // readers' time waiting on blocks
}

// ReadStats returns the counters.
func ReadStats() Stats {
	return Stats{
		Requests: stats.requests.Load(), Retries: stats.retries.Load(), Failures: stats.failures.Load(),
		Bytes: stats.bytes.Load(), Hits: stats.hits.Load(), Misses: stats.misses.Load(),
		Wait: time.Duration(stats.waitNanos.Load()),
	}
}

// Sub is s − t, counter by counter.
func (s Stats) Sub(t Stats) Stats {
	return Stats{s.Requests - t.Requests, s.Retries - t.Retries, s.Failures - t.Failures, s.Bytes - t.Bytes,
		s.Hits - t.Hits, s.Misses - t.Misses, s.Wait - t.Wait}
}
