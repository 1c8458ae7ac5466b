package remote

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestTimeoutFromEnv: PIPE_REMOTE_TIMEOUT takes Go durations and bare
// seconds; a value it cannot take, there or in another PIPE_REMOTE_*
// variable, is an error naming the variable, also from Open.
func TestTimeoutFromEnv(t *testing.T) {
	for v, want := range map[string]time.Duration{"5s": 5 * time.Second, "500ms": 500 * time.Millisecond, "1m30s": 90 * time.Second, "30": 30 * time.Second, "2.5": 2500 * time.Millisecond, " 7 ": 7 * time.Second} {
		t.Setenv("PIPE_REMOTE_TIMEOUT", v)
		s, err := FromEnv()
		if err != nil || s.Timeout != want {
			t.Errorf("PIPE_REMOTE_TIMEOUT=%q: %v, %v; want %v", v, s.Timeout, err, want)
		}
	}
	for _, v := range []string{"5 s", "fast", "0", "-1s", "-3", "NaN"} {
		t.Setenv("PIPE_REMOTE_TIMEOUT", v)
		if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), "PIPE_REMOTE_TIMEOUT") {
			t.Errorf("PIPE_REMOTE_TIMEOUT=%q: err = %v, want one naming the variable", v, err)
		}
	}
	t.Setenv("PIPE_REMOTE_TIMEOUT", "")
	for _, name := range []string{"PIPE_REMOTE_RETRIES", "PIPE_REMOTE_CACHE_MB", "PIPE_REMOTE_BLOCK_KB", "PIPE_REMOTE_BACKOFF_MS"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, "five")
			if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=five: err = %v, want one naming the variable", name, err)
			}
		})
	}
	s := startS3(t, map[string][]byte{"k": payload(10)})
	t.Setenv("PIPE_REMOTE_TIMEOUT", "5 seconds")
	_, err := Open(context.Background(), s.URL("k"))
	if err == nil || !strings.Contains(err.Error(), "PIPE_REMOTE_TIMEOUT") || !strings.Contains(err.Error(), "s3://pipe/k") {
		t.Fatalf("Open: err = %v", err)
	}
	if n := s.Requests.Load(); n != 0 {
		t.Fatalf("%d requests with a bad setting", n)
	}
}

// TestStalledStoreTimesOut: a store that answers nothing (ten minutes of
// latency) fails every kind of request (HEAD, GET, listing, download)
// after 1+PIPE_REMOTE_RETRIES tries of PIPE_REMOTE_TIMEOUT each, with an
// error naming the URL and the timeout.
func TestStalledStoreTimesOut(t *testing.T) {
	s := startS3(t, map[string][]byte{"dir/k": payload(10)})
	s.Latency.Store(int64(10 * time.Minute))
	t.Setenv("PIPE_REMOTE_TIMEOUT", "50ms")
	t.Setenv("PIPE_REMOTE_RETRIES", "2")
	t.Setenv("PIPE_REMOTE_BACKOFF_MS", "1")
	t.Setenv("PIPE_REMOTE_CACHE_DIR", t.TempDir())
	ctx := context.Background()
	for _, c := range []struct {
		what string
		do   func() error
	}{
		{"open", func() error { _, err := Open(ctx, s.URL("dir/k")); return err }},
		{"fetch", func() error { _, err := Fetch(ctx, s.URL("dir/k")); return err }},
		{"list", func() error { _, err := List(ctx, s.URL("dir")); return err }},
		{"read", func() error {
			o, err := OpenFolder(s.URL("dir"))
			if err != nil {
				return err
			}
			_, err = o.Child("k").ReadAll(ctx)
			return err
		}},
		{"download", func() error { return Download(ctx, s.URL("dir/k"), t.TempDir()+"/k") }},
	} {
		t.Run(c.what, func(t *testing.T) {
			before := s.Requests.Load()
			err := c.do()
			if err == nil {
				t.Fatal("no error from a stalled store")
			}
			for _, want := range []string{"s3://pipe/dir", "within 50ms (PIPE_REMOTE_TIMEOUT)", "gave up after 3 tries"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v; want it to say %q", err, want)
				}
			}
			if n := s.Requests.Load() - before; n != 3 {
				t.Errorf("%d requests, want 3 (1 + PIPE_REMOTE_RETRIES)", n)
			}
		})
	}
}

// TestRefusedEndpointNamesURL: a store that refuses connections gives an
// error with the object's URL and the cause, never Go's empty `Head ""`.
func TestRefusedEndpointNamesURL(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	Reset(-1)
	t.Cleanup(func() { Reset(-1) })
	t.Setenv("AWS_ENDPOINT_URL_S3", "http://"+addr)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAPIPETESTKEY00001")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "pipe-test-secret-Xy7Qw9Zr2Lk5")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("PIPE_REMOTE_RETRIES", "1")
	t.Setenv("PIPE_REMOTE_BACKOFF_MS", "1")
	for _, u := range []string{"s3://bucket/scene.tif", "http://" + addr + "/scene.tif"} {
		_, err := Open(context.Background(), u)
		if err == nil {
			t.Fatalf("%s: no error", u)
		}
		msg := err.Error()
		if !strings.Contains(msg, u) || !strings.Contains(msg, "connection refused") || strings.Contains(msg, `""`) {
			t.Errorf("%s: err = %s; want the URL and the cause", u, msg)
		}
		noSecret(t, msg)
	}
}
