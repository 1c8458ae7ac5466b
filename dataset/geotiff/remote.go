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

// Prefetch implements dataset.Prefetcher: for a source read from a URL
// through the direct reader, it starts fetching the blocks of the tiles
// i into the remote cache (a strip's rows of the window, a tile's whole
// block) and returns. Other sources ignore it: a local file needs none,
// and GDAL's path has no block map to ask.
func (d *Dataset) Prefetch(indices []int) {
	t := d.direct
	if d.obj == nil || t == nil {
		return
	}
	lay := t.lay
	planes := []int{0}
	if lay.planar == 2 {
		planes = t.plane
	}
	for _, i := range indices {
		if i < 0 || i >= len(d.tiles) {
			continue
		}
		win := d.tiles[i]
		bx0, bx1 := win.X/lay.bw, (win.X+win.W-1)/lay.bw
		by0, by1 := win.Y/lay.bh, (win.Y+win.H-1)/lay.bh
		for _, p := range planes {
			for by := by0; by <= by1; by++ {
				for bx := bx0; bx <= bx1; bx++ {
					b := t.index(p, bx, by)
					off, n := int64(lay.offsets[b]), int64(lay.counts[b])
					if !lay.tiled && lay.compression == 1 {
						// Only the window's rows of an uncompressed strip.
						rb := int64(t.rowBytes())
						r0 := int64(max(win.Y, by*lay.bh) - by*lay.bh)
						r1 := int64(min(win.Y+win.H, (by+1)*lay.bh) - by*lay.bh)
						off, n = off+r0*rb, (r1-r0)*rb
					}
					if n > 0 {
						d.obj.Prefetch(off, n)
					}
				}
			}
		}
	}
}
