package remote

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// The environment remote reads. Credentials and endpoints are the names
// the AWS tools and GDAL read, so a shell set up for one works for pipe:
//
//	AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN  s3:// keys
//	AWS_SHARED_CREDENTIALS_FILE, AWS_PROFILE   the shared credentials file, when no keys are set
//	AWS_NO_SIGN_REQUEST=YES                    anonymous requests (public buckets)
//	AWS_REGION, AWS_DEFAULT_REGION             the region (us-east-1 when neither)
//	AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL      an S3-compatible store's endpoint, a URL
//	AWS_S3_ENDPOINT, AWS_HTTPS=NO              the same as GDAL takes it: host[:port]
//	AWS_VIRTUAL_HOSTING=TRUE                   bucket.host addressing at an endpoint (path style otherwise)
//	GS_ACCESS_KEY_ID, GS_SECRET_ACCESS_KEY     gs:// HMAC keys (anonymous reads without; writes need them)
//	CPL_GS_ENDPOINT                            the gs:// endpoint, a URL (GDAL's name; Cloud Storage's by default)
//
// and pipe's own knobs:
//
//	PIPE_REMOTE_CACHE_MB   the block cache every object shares (default 256)
//	PIPE_REMOTE_BLOCK_KB   the cache's block, the smallest range read (default 256)
//	PIPE_REMOTE_RETRIES    retries of a failed request (default 5)
//	PIPE_REMOTE_TIMEOUT    how long one request may take, body included: a duration (5s, 500ms) or seconds (default 30s)
//	PIPE_REMOTE_BACKOFF_MS the first retry's wait, doubled for each next one up to 16× (default 100)
//	PIPE_REMOTE_CACHE_DIR  where Fetch keeps its copies of objects (default the user's cache folder, pipe/remote)

// Settings are pipe's own knobs, as the environment gives them.
type Settings struct {
	CacheBytes int64         // the shared block cache's budget
	BlockBytes int64         // the cache's block
	Retries    int           // retries after a failed request
	Timeout    time.Duration // one request, from sending it to its body's last byte
	Backoff    time.Duration // the first retry's wait; each next one doubles, up to 16×
}

// Defaults are the settings without environment variables.
var Defaults = Settings{CacheBytes: 256 << 20, BlockBytes: 256 << 10, Retries: 5, Timeout: 30 * time.Second, Backoff: 100 * time.Millisecond}

// FromEnv is Defaults with the PIPE_REMOTE_* variables that are set
// applied. A value that is not one the variable takes is an error that
// names the variable: a typo must not leave a run waiting on the
// default's 30 s and 5 retries where the user asked for less.
func FromEnv() (Settings, error) {
	s := Defaults
	var bad []string
	num := func(name string, min int64) (int64, bool) {
		v := strings.TrimSpace(os.Getenv(name))
		if v == "" {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < min {
			bad = append(bad, fmt.Sprintf("%s=%q is not a whole number of at least %d", name, v, min))
			return 0, false
		}
		return n, true
	}
	if v, ok := num("PIPE_REMOTE_CACHE_MB", 0); ok {
		s.CacheBytes = v << 20
	}
	if v, ok := num("PIPE_REMOTE_BLOCK_KB", 1); ok {
		s.BlockBytes = v << 10
	}
	if v, ok := num("PIPE_REMOTE_RETRIES", 0); ok {
		s.Retries = int(v)
	}
	if v := strings.TrimSpace(os.Getenv("PIPE_REMOTE_TIMEOUT")); v != "" {
		d, err := parseTimeout(v)
		if err != nil {
			bad = append(bad, fmt.Sprintf("PIPE_REMOTE_TIMEOUT=%q %v", v, err))
		} else {
			s.Timeout = d
		}
	}
	if v, ok := num("PIPE_REMOTE_BACKOFF_MS", 0); ok {
		s.Backoff = time.Duration(v) * time.Millisecond
	}
	if len(bad) > 0 {
		return Defaults, fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return s, nil
}

// parseTimeout reads a timeout as Go writes durations (5s, 500ms, 1m30s)
// or as bare seconds (30, 2.5), which the variable took first.
func parseTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || math.IsNaN(f) || math.IsInf(f, 0) || f > 1e9 {
			return 0, fmt.Errorf("is not a duration such as 30s or 500ms, nor a number of seconds")
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d <= 0 {
		return 0, fmt.Errorf("is not a positive duration")
	}
	return d, nil
}

func envTrue(name string) bool {
	switch strings.ToUpper(strings.TrimSpace(os.Getenv(name))) {
	case "YES", "TRUE", "ON", "1":
		return true
	}
	return false
}

func envFalse(name string) bool {
	switch strings.ToUpper(strings.TrimSpace(os.Getenv(name))) {
	case "NO", "FALSE", "OFF", "0":
		return true
	}
	return false
}

// firstEnv is the first of names that is set and not empty.
func firstEnv(names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(os.Getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

// gsEndpoint is the gs:// endpoint: CPL_GS_ENDPOINT (GDAL reads the
// same), else Cloud Storage's; host[:port] and whether it is https.
func gsEndpoint() (host string, secure bool, err error) {
	u := firstEnv("CPL_GS_ENDPOINT")
	if u == "" {
		return "storage.googleapis.com", true, nil
	}
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return "", false, fmt.Errorf("CPL_GS_ENDPOINT is not a URL with a host (%q)", Redact(u))
	}
	return p.Host, p.Scheme != "http", nil
}

// transport is the HTTP transport every store shares: connections kept
// open for the loader's concurrent readers.
var transport = &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	MaxIdleConns:          256,
	MaxIdleConnsPerHost:   64,
	IdleConnTimeout:       90 * time.Second,
	TLSHandshakeTimeout:   10 * time.Second,
	ExpectContinueTimeout: time.Second,
	DisableCompression:    true, // byte ranges of the object as stored
}
