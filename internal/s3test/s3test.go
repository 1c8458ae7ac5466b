// Package s3test runs an S3-protocol server on 127.0.0.1 for the tests and
// benchmarks of remote sources: gofakes3's in-memory store behind a
// middleware that injects latency, denied requests and failures, so that
// pipe's client, its retries and GDAL's /vsis3/ all meet a real server.
package s3test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Bucket is the bucket every object is put in.
const Bucket = "pipe"

// Keys are the credentials the tests set; the server accepts any, so a
// test can check that none of them leaks into an error.
const (
	AccessKey = "AKIAPIPETESTKEY00001"
	SecretKey = "pipe-test-secret-Xy7Qw9Zr2Lk5"
)

// Server is the S3 server and its injected faults, which may be changed
// while it runs.
type Server struct {
	srv     *httptest.Server
	backend *s3mem.Backend
	closing chan struct{}

	// Latency is slept before each request is answered (a round trip's,
	// or a stalled store's: the wait ends early when the client gives up
	// or the server closes, so a test's Close never waits it out).
	Latency atomic.Int64 // nanoseconds
	// FailEvery, when n > 0, fails every n-th request: with DropConn the
	// connection is closed without an answer, otherwise answered 503.
	FailEvery atomic.Int64
	DropConn  atomic.Bool
	// Deny answers every request 403 AccessDenied.
	Deny atomic.Bool

	// Requests counts the requests received; Failed those the faults
	// answered.
	Requests, Failed atomic.Int64
}

// Start starts a server holding objects (key → bytes) in Bucket.
func Start(objects map[string][]byte) (*Server, error) {
	s := &Server{backend: s3mem.New(), closing: make(chan struct{})}
	if err := s.backend.CreateBucket(Bucket); err != nil {
		return nil, err
	}
	for k, b := range objects {
		if err := s.Put(k, b); err != nil {
			return nil, err
		}
	}
	faker := gofakes3.New(s.backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	h := faker.Server()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.Requests.Add(1)
		if d := s.Latency.Load(); d > 0 {
			t := time.NewTimer(time.Duration(d))
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return // the client went away: nothing to answer
			case <-s.closing:
				t.Stop()
				return
			}
		}
		if s.Deny.Load() {
			s.Failed.Add(1)
			fail(w, r, http.StatusForbidden, "AccessDenied", "Access Denied")
			return
		}
		if k := s.FailEvery.Load(); k > 0 && n%k == 0 {
			s.Failed.Add(1)
			if s.DropConn.Load() {
				if hj, ok := w.(http.Hijacker); ok {
					if c, _, err := hj.Hijack(); err == nil {
						c.Close()
						return
					}
				}
			}
			fail(w, r, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
			return
		}
		h.ServeHTTP(w, r)
	}))
	s.srv.Listener.Close()
	s.srv.Listener = l
	s.srv.Start()
	return s, nil
}

func fail(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource></Error>`, code, msg, r.URL.Path)
	}
}

// Put stores b at key.
func (s *Server) Put(key string, b []byte) error {
	// The headers gofakes3's own PUT records, which its GET and HEAD send.
	meta := map[string]string{"Last-Modified": time.Now().UTC().Format(http.TimeFormat), "Content-Type": "application/octet-stream"}
	_, err := s.backend.PutObject(Bucket, key, meta, strings.NewReader(string(b)), int64(len(b)), nil)
	return err
}

// Get is the object at key, and whether there is one.
func (s *Server) Get(key string) ([]byte, bool) {
	o, err := s.backend.GetObject(Bucket, key, nil)
	if err != nil {
		return nil, false
	}
	defer o.Contents.Close()
	b, err := io.ReadAll(o.Contents)
	return b, err == nil
}

// Keys are the keys of the objects under prefix, in order.
func (s *Server) Keys(prefix string) []string {
	p := gofakes3.NewPrefix(&prefix, nil)
	l, err := s.backend.ListBucket(Bucket, &p, gofakes3.ListBucketPage{})
	if err != nil {
		return nil
	}
	var keys []string
	for _, c := range l.Contents {
		keys = append(keys, c.Key)
	}
	sort.Strings(keys)
	return keys
}

// Delete removes the object at key.
func (s *Server) Delete(key string) error {
	_, err := s.backend.DeleteObject(Bucket, key)
	return err
}

// Endpoint is the server's URL, http://127.0.0.1:port.
func (s *Server) Endpoint() string { return s.srv.URL }

// HostPort is the server's address, as GDAL's AWS_S3_ENDPOINT takes it.
func (s *Server) HostPort() string { return strings.TrimPrefix(s.srv.URL, "http://") }

// URL is the s3:// URL of key.
func (s *Server) URL(key string) string { return "s3://" + Bucket + "/" + key }

// Env is the environment that points pipe's client (and GDAL's
// /vsis3/) at the server, with the test keys.
func (s *Server) Env() map[string]string {
	return map[string]string{
		"AWS_ENDPOINT_URL_S3":   s.Endpoint(),
		"AWS_S3_ENDPOINT":       s.HostPort(),
		"AWS_HTTPS":             "NO",
		"AWS_VIRTUAL_HOSTING":   "FALSE",
		"AWS_ACCESS_KEY_ID":     AccessKey,
		"AWS_SECRET_ACCESS_KEY": SecretKey,
		"AWS_REGION":            "us-east-1",
	}
}

// GSEnv is the environment that points pipe's gs:// client at the
// server, with HMAC keys: the server speaks the same protocol as Cloud
// Storage's interoperability API, and accepts any signature.
func (s *Server) GSEnv() map[string]string {
	return map[string]string{
		"CPL_GS_ENDPOINT":      s.Endpoint(),
		"GS_ACCESS_KEY_ID":     AccessKey,
		"GS_SECRET_ACCESS_KEY": SecretKey,
	}
}

// Reset clears the faults and counters.
func (s *Server) Reset() {
	s.Latency.Store(0)
	s.FailEvery.Store(0)
	s.DropConn.Store(false)
	s.Deny.Store(false)
	s.Requests.Store(0)
	s.Failed.Store(0)
}

// Close stops the server, ending the requests it is holding back.
func (s *Server) Close() {
	select {
	case <-s.closing:
	default:
		close(s.closing)
	}
	s.srv.Close()
}
