//go:build cgo

package geotiff

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/airbusgeo/godal"

	"pipe/dataset/remote"
)

// A source path that is a URL (s3://, gs://, https://) is read through
// package remote: GDAL opens it as /vsipipe/<id>/<name>, a file system
// whose reads are remote.Object's (the shared block cache, the retries),
// and the direct block reader reads the same Object. So GDAL's header
// and statistics reads and the loader's window reads share one cache and
// one retry policy, and their errors name the URL without credentials.
// Why not GDAL's /vsis3/: docs/design/remote-sources.md.

const vsiPrefix = "/vsipipe/"

var (
	vsiOnce sync.Once
	vsiErr  error
)

// vsiObjects serves GDAL's reads of the objects remote has opened; any
// other name (a sidecar .aux.xml or .ovr GDAL looks for) does not exist,
// without a request.
type vsiObjects struct{}

func (vsiObjects) Size(key string) (int64, error) {
	if o := remote.Lookup(key); o != nil {
		return o.Size(), nil
	}
	return 0, os.ErrNotExist
}

func (vsiObjects) ReadAt(key string, buf []byte, off int64) (int, error) {
	o := remote.Lookup(key)
	if o == nil {
		return 0, os.ErrNotExist
	}
	return o.ReadAt(buf, off)
}

func registerVSI() error {
	vsiOnce.Do(func() {
		gdalInit()
		// GDAL's own buffering in front of the handler: one block of
		// 64 KiB a read, 1 MiB a handle; remote's cache is behind it.
		vsiErr = godal.RegisterVSIHandler(vsiPrefix, vsiObjects{},
			godal.VSIHandlerStripPrefix(true), godal.VSIHandlerBufferSize(64<<10), godal.VSIHandlerCacheSize(1<<20))
	})
	return vsiErr
}

// raster is a path a source names, resolved: what GDAL opens, what
// messages show, and the object when it is a URL.
type raster struct {
	gdal  string         // the path GDAL opens
	shown string         // as written, a URL redacted
	obj   *remote.Object // nil for a local file
}

// resolve finds the raster p names: a local file must exist (the error
// says where it was looked for), a URL's object must answer (the error
// names it: missing, denied, unreachable).
func resolve(c *Options, p string) (*raster, error) {
	if !remote.IsURL(p) {
		abs := c.path(p)
		if _, err := os.Stat(abs); err != nil {
			return nil, fileErr(c, p, err)
		}
		return &raster{gdal: abs, shown: p}, nil
	}
	if err := registerVSI(); err != nil {
		return nil, fmt.Errorf("%s: %v", remote.Redact(p), err)
	}
	o, err := remote.Open(context.Background(), p)
	if err != nil {
		return nil, err
	}
	return &raster{gdal: vsiPrefix + o.Path(), shown: o.URL(), obj: o}, nil
}

// open resolves p and opens it with GDAL.
func open(c *Options, p string) (*raster, *godal.Dataset, error) {
	r, err := resolve(c, p)
	if err != nil {
		return nil, nil, err
	}
	h, err := godal.Open(r.gdal, godal.RasterOnly(), godal.SkipWarnings)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: GDAL cannot open it as a raster: %v", r.shown, err)
	}
	return r, h, nil
}

// shownPath is p as messages show it.
func shownPath(p string) string {
	if remote.IsURL(p) {
		return remote.Redact(p)
	}
	return p
}
