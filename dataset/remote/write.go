package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/minio/minio-go/v7"

	"pipe/spec"
)

// Writes, listings and deletions, for a run's folder in an object store
// (its checkpoints and report) and for Fetch's copies of a folder. Only
// the stores that have them, s3:// and gs:// with HMAC keys, do; a URL
// of any other scheme is refused by Writable before anything runs.
// Semantics and reasons: docs/design/remote-sources.md.

// Entry is an object listed under a folder URL.
type Entry struct {
	Rel  string // its key under the folder, '/'-separated
	Size int64
	ETag string // the store's tag of this version of the object
}

// writer is a store that writes, lists and deletes objects.
type writer interface {
	put(ctx context.Context, l *location, r io.Reader, size int64) error
	remove(ctx context.Context, l *location) error
	list(ctx context.Context, l *location) ([]Entry, error)
}

// Writable says what is wrong with writing objects under URL u, nil when
// nothing: its scheme is one pipe writes (s3://, gs://), it names a
// bucket and a key, and for gs:// HMAC keys are set (Cloud Storage
// accepts no anonymous writes). No request is made.
func Writable(u string) error {
	_, _, err := writerFor(u)
	return err
}

func writerFor(u string) (*location, writer, error) {
	sch := spec.URLScheme(u)
	if !spec.SchemeIn(sch, spec.WriteSchemes) {
		return nil, nil, fmt.Errorf("%s: pipe writes to %s URLs only", Redact(u), spec.SchemeList(spec.WriteSchemes))
	}
	loc, err := parse(strings.TrimSuffix(u, "/"))
	if err != nil {
		return nil, nil, err
	}
	if loc.scheme == "gs" && firstEnv("GS_ACCESS_KEY_ID") == "" {
		return nil, nil, fmt.Errorf("%s: writing to gs:// needs HMAC keys in GS_ACCESS_KEY_ID and GS_SECRET_ACCESS_KEY (Cloud Storage's interoperability keys)", loc.shown)
	}
	st, err := newS3(loc.scheme)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", loc.shown, err)
	}
	return loc, st, nil
}

// handle is an Object that carries a location's retries, for requests
// that are not reads of one object.
func handle(loc *location) (*Object, error) {
	set, err := FromEnv()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", loc.shown, err)
	}
	return &Object{loc: loc, size: -1, set: set}, nil
}

// Put writes the local file at src to the object at URL u, retried as
// reads are. The store publishes an object whole when its upload
// completes (one PUT, or the last step of a multipart upload): a reader
// sees the earlier object or this one, never a part, and an upload cut
// short leaves the earlier object as it was.
func Put(ctx context.Context, u, src string) error {
	loc, st, err := writerFor(u)
	if err != nil {
		return err
	}
	h, err := handle(loc)
	if err != nil {
		return err
	}
	return h.retry(ctx, "writing "+filepath.Base(src), func(ctx context.Context) error {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		return st.put(ctx, loc, f, fi.Size())
	})
}

// PutBytes writes b to the object at URL u, as Put does.
func PutBytes(ctx context.Context, u string, b []byte) error {
	loc, st, err := writerFor(u)
	if err != nil {
		return err
	}
	h, err := handle(loc)
	if err != nil {
		return err
	}
	return h.retry(ctx, "writing the object", func(ctx context.Context) error {
		return st.put(ctx, loc, strings.NewReader(string(b)), int64(len(b)))
	})
}

// Delete removes the object at URL u; one that is not there is no error.
func Delete(ctx context.Context, u string) error {
	loc, st, err := writerFor(u)
	if err != nil {
		return err
	}
	h, err := handle(loc)
	if err != nil {
		return err
	}
	err = h.retry(ctx, "deleting the object", func(ctx context.Context) error { return st.remove(ctx, loc) })
	if errors.Is(err, errNotFound) {
		return nil
	}
	return err
}

// List lists the objects under the folder URL u (every key that starts
// with u's key and a '/'), by key.
func List(ctx context.Context, u string) ([]Entry, error) {
	loc, st, err := listerFor(u)
	if err != nil {
		return nil, err
	}
	h, err := handle(loc)
	if err != nil {
		return nil, err
	}
	var es []Entry
	err = h.retry(ctx, "listing the folder", func(ctx context.Context) error {
		es, err = st.list(ctx, loc)
		return err
	})
	return es, err
}

// listerFor is the store that lists under u: a writer's, or for gs://
// without keys an anonymous client of its S3-compatible API.
func listerFor(u string) (*location, writer, error) {
	loc, err := parse(strings.TrimSuffix(u, "/"))
	if err != nil {
		return nil, nil, err
	}
	switch loc.scheme {
	case "s3":
		st, err := newS3("s3")
		return loc, st, err
	case "gs":
		st, err := newS3("gs") // anonymous without HMAC keys: public buckets
		return loc, st, err
	}
	return nil, nil, fmt.Errorf("%s: a folder is listed at %s URLs only (a web server has no listing)", loc.shown, spec.SchemeList(spec.WriteSchemes))
}

// Download copies the object at URL u to the local file dst, atomically
// (a temporary file in dst's folder, renamed over dst): an interrupted
// download leaves dst as it was. A missing object is an error that
// errors.Is(err, ErrNotFound) tells apart.
func Download(ctx context.Context, u, dst string) error {
	o, err := OpenFolder(u)
	if err != nil {
		return err
	}
	return o.download(ctx, dst)
}

func (o *Object) download(ctx context.Context, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return o.retry(ctx, "downloading the object", func(ctx context.Context) error {
		tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*.part")
		if err != nil {
			return err
		}
		ok := false
		defer func() {
			if !ok {
				tmp.Close()
				os.Remove(tmp.Name())
			}
		}()
		n, err := o.st.copyTo(ctx, o.loc, tmp)
		if err != nil {
			return err
		}
		stats.bytes.Add(n)
		if err := tmp.Sync(); err != nil {
			return err
		}
		if err := tmp.Close(); err != nil {
			return err
		}
		if err := os.Rename(tmp.Name(), dst); err != nil {
			return err
		}
		ok = true
		return nil
	})
}

// ---- the S3 client's writes ---------------------------------------------

func (s *s3Store) put(ctx context.Context, l *location, r io.Reader, size int64) error {
	_, err := s.cl.PutObject(ctx, l.bucket, l.key, r, size, minio.PutObjectOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return s3Err(err)
	}
	return nil
}

func (s *s3Store) remove(ctx context.Context, l *location) error {
	if err := s.cl.RemoveObject(ctx, l.bucket, l.key, minio.RemoveObjectOptions{}); err != nil {
		return s3Err(err)
	}
	return nil
}

func (s *s3Store) list(ctx context.Context, l *location) ([]Entry, error) {
	prefix := strings.TrimSuffix(l.key, "/") + "/"
	var es []Entry
	for info := range s.cl.ListObjects(ctx, l.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if info.Err != nil {
			return nil, s3Err(info.Err)
		}
		rel := strings.TrimPrefix(info.Key, prefix)
		if rel == "" || strings.HasSuffix(rel, "/") {
			continue // the folder's own marker, or another's
		}
		es = append(es, Entry{Rel: rel, Size: info.Size, ETag: info.ETag})
	}
	return es, nil
}

func (s *s3Store) stat(ctx context.Context, l *location) (Entry, error) {
	info, err := s.cl.StatObject(ctx, l.bucket, l.key, minio.StatObjectOptions{})
	if err != nil {
		return Entry{}, s3Err(err)
	}
	return Entry{Rel: path.Base(l.key), Size: info.Size, ETag: info.ETag}, nil
}

// copyTo writes the whole object into w and returns the bytes written.
func (s *s3Store) copyTo(ctx context.Context, l *location, w io.Writer) (int64, error) {
	obj, err := s.cl.GetObject(ctx, l.bucket, l.key, minio.GetObjectOptions{})
	if err != nil {
		return 0, s3Err(err)
	}
	defer obj.Close()
	n, err := io.Copy(w, obj)
	if err != nil {
		return n, s3Err(err)
	}
	return n, nil
}
