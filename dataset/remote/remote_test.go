package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"pipe/internal/s3test"
)

// fast are settings for tests: small blocks, so that reads span several,
// and short back-off.
var fast = Settings{CacheBytes: 1 << 20, BlockBytes: 4 << 10, Retries: 5, Timeout: 5 * time.Second, Backoff: time.Millisecond}

func payload(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func startS3(t *testing.T, objects map[string][]byte) *s3test.Server {
	t.Helper()
	s, err := s3test.Start(objects)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	for k, v := range s.Env() {
		t.Setenv(k, v)
	}
	Reset(-1)
	t.Cleanup(func() { Reset(-1) })
	return s
}

// noSecret fails when s holds either test key.
func noSecret(t *testing.T, s string) {
	t.Helper()
	if strings.Contains(s, s3test.SecretKey) || strings.Contains(s, s3test.AccessKey) {
		t.Fatalf("a credential leaked: %s", s)
	}
}

// checkReads reads random ranges of o from as many goroutines and
// compares them with want.
func checkReads(t *testing.T, o *Object, want []byte) {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	type job struct{ off, n int }
	var jobs []job
	for range 40 {
		off := r.IntN(len(want))
		jobs = append(jobs, job{off, 1 + r.IntN(3*int(o.set.BlockBytes))})
	}
	jobs = append(jobs, job{0, len(want)}, job{len(want) - 7, 100})
	var wg sync.WaitGroup
	errs := make(chan error, len(jobs))
	for _, j := range jobs {
		wg.Go(func() {
			buf := make([]byte, j.n)
			n, err := o.ReadAt(buf, int64(j.off))
			end := min(j.off+j.n, len(want))
			if err != nil && !(errors.Is(err, io.EOF) && n == end-j.off) {
				errs <- err
				return
			}
			if !bytes.Equal(buf[:n], want[j.off:end]) {
				errs <- fmt.Errorf("bytes %d to %d differ", j.off, end)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestS3RangeReads(t *testing.T) {
	want := payload(50_000)
	s := startS3(t, map[string][]byte{"a/b.bin": want})
	o, err := OpenWith(context.Background(), s.URL("a/b.bin"), fast)
	if err != nil {
		t.Fatal(err)
	}
	if o.Size() != int64(len(want)) {
		t.Fatalf("size %d, want %d", o.Size(), len(want))
	}
	checkReads(t, o, want)
	// Everything is cached now: reading again sends nothing.
	before := s.Requests.Load()
	checkReads(t, o, want)
	if n := s.Requests.Load() - before; n != 0 {
		t.Fatalf("%d requests for cached blocks", n)
	}
}

func TestS3Latency(t *testing.T) {
	want := payload(30_000)
	s := startS3(t, map[string][]byte{"x": want})
	s.Latency.Store(int64(20 * time.Millisecond))
	o, err := OpenWith(context.Background(), s.URL("x"), fast)
	if err != nil {
		t.Fatal(err)
	}
	checkReads(t, o, want)
}

func TestS3Failures(t *testing.T) {
	for _, drop := range []bool{false, true} {
		name := map[bool]string{false: "503", true: "dropped"}[drop]
		t.Run(name, func(t *testing.T) {
			want := payload(40_000)
			s := startS3(t, map[string][]byte{"k": want})
			s.FailEvery.Store(3)
			s.DropConn.Store(drop)
			o, err := OpenWith(context.Background(), s.URL("k"), fast)
			if err != nil {
				t.Fatal(err)
			}
			checkReads(t, o, want)
			if s.Failed.Load() == 0 {
				t.Fatal("no request failed: the fault was not injected")
			}
		})
	}
}

func TestS3GivesUp(t *testing.T) {
	s := startS3(t, map[string][]byte{"k": payload(10)})
	s.FailEvery.Store(1)
	set := fast
	set.Retries = 2
	_, err := OpenWith(context.Background(), s.URL("k"), set)
	if err == nil || !strings.Contains(err.Error(), "gave up after 3 tries") || !strings.Contains(err.Error(), "s3://pipe/k") {
		t.Fatalf("err = %v", err)
	}
	noSecret(t, err.Error())
}

func TestS3MissingAndDenied(t *testing.T) {
	s := startS3(t, map[string][]byte{"k": payload(10)})
	_, err := OpenWith(context.Background(), s.URL("nope.tif"), fast)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "s3://pipe/nope.tif: no such object") {
		t.Fatalf("missing: err = %v", err)
	}
	noSecret(t, err.Error())
	if n := s.Requests.Load(); n != 1 {
		t.Fatalf("a missing object took %d requests; it is not retried", n)
	}
	s.Deny.Store(true)
	_, err = OpenWith(context.Background(), s.URL("k"), fast)
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "s3://pipe/k: access denied") {
		t.Fatalf("denied: err = %v", err)
	}
	noSecret(t, err.Error())
	// Denied mid-read: the read's error names the URL too.
	s.Deny.Store(false)
	o, err := OpenWith(context.Background(), s.URL("k"), fast)
	if err != nil {
		t.Fatal(err)
	}
	s.Deny.Store(true)
	_, err = o.ReadAt(make([]byte, 4), 0)
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "s3://pipe/k") {
		t.Fatalf("denied read: err = %v", err)
	}
	noSecret(t, err.Error())
}

func TestHTTPRangeReads(t *testing.T) {
	want := payload(33_333)
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		if r.URL.Path != "/data/x.tif" {
			http.NotFound(w, r)
			return
		}
		if k%3 == 0 {
			http.Error(w, "busy", http.StatusBadGateway)
			return
		}
		http.ServeContent(w, r, "x.tif", time.Time{}, bytes.NewReader(want))
	}))
	defer srv.Close()
	Reset(-1)
	defer Reset(-1)
	// A user and a token in the URL are never shown.
	u := strings.Replace(srv.URL, "http://", "http://user:hunter2@", 1) + "/data/x.tif?token=hunter3"
	o, err := OpenWith(context.Background(), u, fast)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(o.URL(), "hunter") {
		t.Fatalf("URL shown with its secret: %s", o.URL())
	}
	checkReads(t, o, want)
	_, err = OpenWith(context.Background(), strings.Replace(u, "x.tif", "y.tif", 1), fast)
	if !errors.Is(err, ErrNotFound) || strings.Contains(err.Error(), "hunter") {
		t.Fatalf("err = %v", err)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"s3://bucket/a/b.tif":                             "s3://bucket/a/b.tif",
		"https://u:p@host:8080/x.tif?X-Amz-Signature=abc": "https://host:8080/x.tif",
		"gs://b/k#frag":                                   "gs://b/k",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	for _, p := range []string{"s3://b/k", "GS://b/k", "https://h/x", "http://h/x"} {
		if !IsURL(p) {
			t.Errorf("IsURL(%q) = false", p)
		}
	}
	for _, p := range []string{"data/x.tif", "/abs/x.tif", "s3:/x", "file:///x"} {
		if IsURL(p) {
			t.Errorf("IsURL(%q) = true", p)
		}
	}
}
