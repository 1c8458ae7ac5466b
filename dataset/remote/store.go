package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// A store reads objects: their size, and a byte range of one. It makes one
// request a call; Object retries.
type store interface {
	size(ctx context.Context, l *location) (int64, error)
	// get reads n bytes from off (the whole object when n < 0).
	get(ctx context.Context, l *location, off, n int64) ([]byte, error)
	// where says which endpoint serves the store, for the registry's key.
	where() string
	// stat is the object's size and tag (its ETag, else its
	// Last-Modified), which changes when the object does.
	stat(ctx context.Context, l *location) (Entry, error)
	// copyTo writes the whole object into w; it returns the bytes written.
	copyTo(ctx context.Context, l *location, w io.Writer) (int64, error)
}

// statusError is a request the server answered with an error status.
type statusError struct {
	status int
	code   string // the S3 error code, when the server gave one
}

func (e *statusError) Error() string {
	s := fmt.Sprintf("HTTP %d", e.status)
	if e.code != "" {
		s += " " + e.code
	}
	return s
}

// errNotFound and errDenied are what a missing object and a denied request
// wrap, for errors.Is.
var (
	errNotFound = errors.New("no such object")
	errDenied   = errors.New("access denied")
)

// retryable says whether a failed request may succeed when sent again:
// the server's 5xx, 408 and 429, a timeout, a refused, reset or dropped
// connection, a body cut short.
func retryable(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return se.status >= 500 || se.status == 408 || se.status == 429
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return true
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, errShort):
		return true
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE):
		return true
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return true // the transport failed before an answer: worth another try
	}
	return false
}

var errShort = errors.New("the server sent fewer bytes than asked for")

// ---- S3 and GCS, through minio-go -------------------------------------

type s3Store struct {
	cl       *minio.Client
	endpoint string
}

func init() {
	// With MaxRetries 1 minio-go sends a request once, but still sleeps
	// its retry unit (200 ms) after a retryable failure before giving up;
	// Object.retry does the waiting.
	minio.DefaultRetryUnit = 0
}

// newS3 is the client of s3:// or gs:// URLs, as the environment sets
// it up (config.go lists the variables).
func newS3(scheme string) (*s3Store, error) {
	opts := &minio.Options{Transport: transport, MaxRetries: 1, Region: firstEnv("AWS_REGION", "AWS_DEFAULT_REGION")}
	endpoint, secure := "s3.amazonaws.com", true
	custom := false
	if scheme == "gs" {
		var err error
		if endpoint, secure, err = gsEndpoint(); err != nil {
			return nil, err
		}
		opts.Region = ""
		id, secret := firstEnv("GS_ACCESS_KEY_ID"), firstEnv("GS_SECRET_ACCESS_KEY")
		opts.Creds = credentials.NewStaticV2(id, secret, "")
		opts.BucketLookup = minio.BucketLookupPath
	} else {
		if opts.Region == "" {
			opts.Region = "us-east-1" // no GetBucketLocation round trip
		}
		if u := firstEnv("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"); u != "" {
			p, err := url.Parse(u)
			if err != nil || p.Host == "" {
				return nil, fmt.Errorf("AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL is not a URL with a host (%q)", Redact(u))
			}
			endpoint, secure, custom = p.Host, p.Scheme != "http", true
		} else if h := firstEnv("AWS_S3_ENDPOINT"); h != "" {
			endpoint, secure, custom = strings.TrimSuffix(h, "/"), !envFalse("AWS_HTTPS"), true
			if i := strings.Index(endpoint, "://"); i >= 0 {
				secure = !strings.EqualFold(endpoint[:i], "http") && !envFalse("AWS_HTTPS")
				endpoint = endpoint[i+3:]
			}
		}
		switch {
		case envTrue("AWS_NO_SIGN_REQUEST"):
			opts.Creds = credentials.NewStaticV4("", "", "")
		default:
			opts.Creds = credentials.NewChainCredentials([]credentials.Provider{
				&credentials.EnvAWS{},
				&credentials.FileAWSCredentials{},
			})
		}
		opts.BucketLookup = minio.BucketLookupAuto
		if custom {
			opts.BucketLookup = minio.BucketLookupPath
			if envTrue("AWS_VIRTUAL_HOSTING") {
				opts.BucketLookup = minio.BucketLookupDNS
			}
		}
	}
	opts.Secure = secure
	cl, err := minio.New(endpoint, opts)
	if err != nil {
		// minio's messages name the endpoint, never the keys.
		return nil, fmt.Errorf("the %s endpoint %s: %v", scheme, endpoint, err)
	}
	cl.SetAppInfo("pipe", "1")
	return &s3Store{cl: cl, endpoint: map[bool]string{true: "https://", false: "http://"}[secure] + endpoint}, nil
}

func (s *s3Store) where() string { return s.endpoint }

func s3Err(err error) error {
	r := minio.ToErrorResponse(err)
	if r.StatusCode == 0 {
		return clean(err) // the transport's, or ours
	}
	se := &statusError{status: r.StatusCode, code: r.Code}
	switch {
	case r.StatusCode == 404 || r.Code == "NoSuchKey" || r.Code == "NoSuchBucket":
		return fmt.Errorf("%w (%v)", errNotFound, se)
	case r.StatusCode == 401 || r.StatusCode == 403:
		return fmt.Errorf("%w (%v)", errDenied, se)
	}
	return se
}

func (s *s3Store) size(ctx context.Context, l *location) (int64, error) {
	info, err := s.cl.StatObject(ctx, l.bucket, l.key, minio.StatObjectOptions{})
	if err != nil {
		return 0, s3Err(err)
	}
	return info.Size, nil
}

func (s *s3Store) get(ctx context.Context, l *location, off, n int64) ([]byte, error) {
	var o minio.GetObjectOptions
	if n >= 0 {
		if n == 0 {
			return nil, nil
		}
		if err := o.SetRange(off, off+n-1); err != nil {
			return nil, err
		}
	}
	obj, err := s.cl.GetObject(ctx, l.bucket, l.key, o)
	if err != nil {
		return nil, s3Err(err)
	}
	defer obj.Close()
	if n < 0 {
		b, err := io.ReadAll(obj)
		if err != nil {
			return nil, s3Err(err)
		}
		return b, nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(obj, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errShort
		}
		return nil, s3Err(err)
	}
	return b, nil
}

// ---- HTTP(S) ------------------------------------------------------------

type httpStore struct{ cl *http.Client }

var plainHTTP = &httpStore{cl: &http.Client{Transport: transport}}

func (s *httpStore) where() string { return "" }

func httpErr(status int) error {
	se := &statusError{status: status}
	switch status {
	case 404, 410:
		return fmt.Errorf("%w (%v)", errNotFound, se)
	case 401, 403:
		return fmt.Errorf("%w (%v)", errDenied, se)
	}
	return se
}

// clean drops the URL (which may hold a secret, and which minio-go
// gives as the endpoint's, not the object's) from a transport error,
// keeping what failed: Object names the object itself, redacted. The
// error still unwraps to the *url.Error, for retryable.
func clean(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &transportError{ue}
	}
	return err
}

// transportError is a request that failed before an answer; it reads as
// its cause ("dial tcp ...: connection refused"), never as Go's
// `Head "URL": ...` with the URL removed.
type transportError struct{ ue *url.Error }

func (e *transportError) Error() string { return e.ue.Err.Error() }
func (e *transportError) Unwrap() error { return e.ue }

func (s *httpStore) size(ctx context.Context, l *location) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, l.raw, nil)
	if err != nil {
		return 0, clean(err)
	}
	resp, err := s.cl.Do(req)
	if err != nil {
		return 0, clean(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK && resp.ContentLength >= 0 {
		return resp.ContentLength, nil
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusMethodNotAllowed {
		return 0, httpErr(resp.StatusCode)
	}
	// No length from HEAD: the first byte's Content-Range gives it.
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, l.raw, nil)
	req.Header.Set("Range", "bytes=0-0")
	resp, err = s.cl.Do(req)
	if err != nil {
		return 0, clean(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent {
		if resp.StatusCode == http.StatusOK {
			return 0, errors.New("the server answers no range requests")
		}
		return 0, httpErr(resp.StatusCode)
	}
	cr := resp.Header.Get("Content-Range")
	i := strings.LastIndex(cr, "/")
	size, err := strconv.ParseInt(cr[i+1:], 10, 64)
	if i < 0 || err != nil {
		return 0, fmt.Errorf("the server gave no size (Content-Range %q)", cr)
	}
	return size, nil
}

func (s *httpStore) stat(ctx context.Context, l *location) (Entry, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, l.raw, nil)
	if err != nil {
		return Entry{}, clean(err)
	}
	resp, err := s.cl.Do(req)
	if err != nil {
		return Entry{}, clean(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Entry{}, httpErr(resp.StatusCode)
	}
	tag := resp.Header.Get("ETag")
	if tag == "" {
		tag = resp.Header.Get("Last-Modified")
	}
	return Entry{Rel: path.Base(l.key), Size: resp.ContentLength, ETag: tag}, nil
}

func (s *httpStore) copyTo(ctx context.Context, l *location, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.raw, nil)
	if err != nil {
		return 0, clean(err)
	}
	resp, err := s.cl.Do(req)
	if err != nil {
		return 0, clean(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return 0, httpErr(resp.StatusCode)
	}
	n, err := io.Copy(w, resp.Body)
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = errShort
	}
	return n, clean(err)
}

func (s *httpStore) get(ctx context.Context, l *location, off, n int64) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.raw, nil)
	if err != nil {
		return nil, clean(err)
	}
	if n > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	}
	resp, err := s.cl.Do(req)
	if err != nil {
		return nil, clean(err)
	}
	defer resp.Body.Close()
	switch {
	case n < 0 && resp.StatusCode == http.StatusOK:
		b, err := io.ReadAll(resp.Body)
		return b, clean(err)
	case resp.StatusCode == http.StatusPartialContent:
	case resp.StatusCode == http.StatusOK:
		return nil, errors.New("the server answers no range requests")
	default:
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, httpErr(resp.StatusCode)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(resp.Body, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errShort
		}
		return nil, clean(err)
	}
	return b, nil
}
