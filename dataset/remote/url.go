// Package remote reads objects from S3-compatible stores (s3://), Google
// Cloud Storage (gs://) and HTTP(S) servers (https://, http://) by byte
// range, for the sources whose path is a URL: a GeoTIFF or COG read through
// GDAL and pipe's direct block reader, a Zarr array's chunks by key.
//
// An Object is a sized io.ReaderAt. Its reads go through one block cache
// that every object of the process shares (its budget is
// PIPE_REMOTE_CACHE_MB), each missing run of blocks is one range request,
// concurrent readers of a block wait for one fetch, and a request that
// fails with a 5xx, a 429, a timeout or a dropped connection is retried
// with exponential back-off. A missing object (404) or a denied request
// (401, 403) fails at once with an error naming the URL as Redact shows
// it. Credentials and endpoints come from the standard environment
// (config.go) and never appear in an error or a log line.
// Full description: docs/design/remote-sources.md.
package remote

import (
	"fmt"
	"net/url"
	"path"
	"strings"

	"pipe/spec"
)

// IsURL reports whether a source's path names an object in a store or on
// a server rather than a local file.
func IsURL(p string) bool {
	return spec.SchemeIn(spec.URLScheme(p), spec.ReadSchemes)
}

// Redact is u as pipe shows it in diagnostics and reports: scheme, host
// and path, without user information, query or fragment (a presigned
// URL's signature is in its query).
func Redact(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Scheme == "" {
		// Not a URL pipe can parse: show only up to an '@' or '?', which
		// could start or hide a secret.
		if i := strings.IndexAny(u, "?#"); i >= 0 {
			u = u[:i]
		}
		if i := strings.LastIndex(u, "@"); i >= 0 {
			if j := strings.Index(u, "://"); j >= 0 && j < i {
				u = u[:j+3] + u[i+1:]
			}
		}
		return u
	}
	p.User, p.RawQuery, p.Fragment, p.ForceQuery = nil, "", "", false
	return p.String()
}

// location is a parsed URL: the store's scheme, its bucket (s3, gs) or
// host (http), and the key.
type location struct {
	scheme string // s3, gs, http, https
	bucket string // s3, gs
	key    string // the object's key (s3, gs), or the path and query (http)
	raw    string // as written, for requests only: never shown
	shown  string // Redact(raw)
}

func parse(u string) (*location, error) {
	p, err := url.Parse(u)
	if err != nil {
		return nil, fmt.Errorf("%s: not a URL pipe can read: %v", Redact(u), redactErr(err, u))
	}
	l := &location{scheme: strings.ToLower(p.Scheme), raw: u, shown: Redact(u)}
	switch l.scheme {
	case "s3", "gs":
		l.bucket = p.Host
		l.key = strings.TrimPrefix(p.Path, "/")
		if l.bucket == "" || l.key == "" {
			return nil, fmt.Errorf("%s: give %s://bucket/key", l.shown, l.scheme)
		}
		if p.User != nil {
			return nil, fmt.Errorf("%s: credentials go in the environment, not in an %s:// URL", l.shown, l.scheme)
		}
	case "http", "https":
		if p.Host == "" {
			return nil, fmt.Errorf("%s: the URL has no host", l.shown)
		}
		l.key = p.RequestURI()
	default:
		return nil, fmt.Errorf("%s: pipe reads %s URLs", l.shown, spec.SchemeList(spec.ReadSchemes))
	}
	return l, nil
}

// child is the object at key rel under l's key taken as a folder (a Zarr
// array's chunk).
func (l *location) child(rel string) *location {
	c := *l
	switch l.scheme {
	case "s3", "gs":
		c.key = path.Join(l.key, rel)
		c.raw = l.scheme + "://" + l.bucket + "/" + c.key
	default:
		p, _ := url.Parse(l.raw)
		p.Path = path.Join(p.Path, rel)
		p.RawPath = ""
		c.raw = p.String()
		c.key = p.RequestURI()
	}
	c.shown = Redact(c.raw)
	return &c
}

// redactErr is err's text with u (which may hold a secret) replaced by
// its redaction.
func redactErr(err error, u string) string {
	s := err.Error()
	if r := Redact(u); r != u {
		s = strings.ReplaceAll(s, u, r)
	}
	return s
}
