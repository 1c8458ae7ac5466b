//go:build cgo

package geotiff

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airbusgeo/godal"

	"pipe/dataset/internal/datatest"
	"pipe/dataset/remote"
	"pipe/internal/progtest"
	"pipe/internal/s3test"
)

// s3Fixture starts an S3 server holding the files of dir under their
// names, points the environment at it and gives the remote cache budget
// cacheBytes (small, so that tile reads go to the server rather than
// finding everything left by Open's statistics pass).
func s3Fixture(t *testing.T, dir string, cacheBytes int64, names ...string) *s3test.Server {
	t.Helper()
	objs := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		objs["rasters/"+n] = b
	}
	s, err := s3test.Start(objs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	for k, v := range s.Env() {
		t.Setenv(k, v)
	}
	t.Setenv("PIPE_REMOTE_BLOCK_KB", "16")
	t.Setenv("PIPE_REMOTE_BACKOFF_MS", "1")
	remote.Reset(cacheBytes)
	t.Cleanup(func() { remote.Reset(-1) })
	return s
}

// compareRemote opens body's source once from dir and once from the
// server, and compares every tile's x, y and mask bit for bit.
func compareRemote(t *testing.T, s *s3test.Server, dir, name, body string, wantDirect bool) {
	t.Helper()
	local := openGDALPath(t, fmt.Sprintf(`source s geotiff { path %q  %s }`, name, body), dir, true)
	rem := openGDALPath(t, fmt.Sprintf(`source s geotiff { path %q  %s }`, s.URL("rasters/"+name), strings.ReplaceAll(body, `target "`, `target "`+s.URL("rasters/"))), dir, true)
	if (rem.direct != nil) != wantDirect || (local.direct != nil) != wantDirect {
		t.Fatalf("direct reader: local %v, remote %v, want %v", local.direct != nil, rem.direct != nil, wantDirect)
	}
	if rem.Len() != local.Len() || rem.Norm().Mean[0] != local.Norm().Mean[0] {
		t.Fatalf("remote: %d tiles, mean %v; local %d, %v", rem.Len(), rem.Norm().Mean, local.Len(), local.Norm().Mean)
	}
	lx, ly, lm := datatest.ReadAll(t, local)
	rx, ry, rm := datatest.ReadAll(t, rem)
	for i := range lx {
		same(t, i, "x", rx[i], lx[i])
		same(t, i, "y", ry[i], ly[i])
		same(t, i, "mask", rm[i], lm[i])
	}
}

// TestGeoTIFFRemote: a source read from s3:// gives the local file's
// tiles bit for bit, through GDAL's path (float32) and the direct reader
// (a ZSTD COG, uncompressed strips), with latency and with every third
// request failing.
func TestGeoTIFFRemote(t *testing.T) {
	dir := geoFixture(t)
	directFile(t, dir, "zstd-cog.tif", godal.UInt16, []string{"-co", "COMPRESS=ZSTD", "-co", "PREDICTOR=2", "-of", "COG", "-co", "BLOCKSIZE=256"})
	directFile(t, dir, "striped.tif", godal.Byte, []string{"-of", "GTiff"})
	faults := []struct {
		name  string
		apply func(s *s3test.Server)
	}{
		{"clean", func(*s3test.Server) {}},
		{"latency", func(s *s3test.Server) { s.Latency.Store(int64(3 * time.Millisecond)) }},
		{"every-third-503", func(s *s3test.Server) { s.FailEvery.Store(3) }},
		{"every-third-dropped", func(s *s3test.Server) { s.FailEvery.Store(3); s.DropConn.Store(true) }},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			s := s3Fixture(t, dir, 64<<10, "scene.tif", "target.tif", "zstd-cog.tif", "striped.tif")
			f.apply(s)
			compareRemote(t, s, dir, "scene.tif", `bands [1, 3]  target "target.tif"  tile 8x8 stride 6`, false)
			compareRemote(t, s, dir, "zstd-cog.tif", `tile 90x100 stride 77`, true)
			compareRemote(t, s, dir, "striped.tif", `bands [3, 2]  tile 64x64 stride 50`, true)
			if f.name != "clean" && f.name != "latency" && s.Failed.Load() == 0 {
				t.Fatal("no request failed: the fault was not injected")
			}
		})
	}
}

// TestGeoTIFFRemoteErrors: a missing key and a denied request fail Open
// with an error naming the URL and never a credential; plan's header
// reads (Tiles, Size, Resident) say the same.
func TestGeoTIFFRemoteErrors(t *testing.T) {
	dir := geoFixture(t)
	s := s3Fixture(t, dir, 1<<20, "scene.tif")
	check := func(err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want it to say %q", err, want)
		}
		if strings.Contains(err.Error(), s3test.SecretKey) || strings.Contains(err.Error(), s3test.AccessKey) {
			t.Fatalf("a credential leaked: %v", err)
		}
	}
	missing := progtest.Source(t, fmt.Sprintf(`source s geotiff { path %q  tile 8x8 }`, s.URL("rasters/nope.tif")))
	_, err := Open(missing, under(dir))
	check(err, "s3://pipe/rasters/nope.tif: no such object")
	_, err = Tiles(missing, under(dir))
	check(err, "s3://pipe/rasters/nope.tif: no such object")

	src := progtest.Source(t, fmt.Sprintf(`source s geotiff { path %q  tile 8x8 }`, s.URL("rasters/scene.tif")))
	n, err := Tiles(src, under(dir))
	if err != nil || n != 20 {
		t.Fatalf("Tiles = %d, %v; want 20", n, err)
	}
	w, h, err := Size(src, under(dir))
	if err != nil || w != sceneW || h != sceneH {
		t.Fatalf("Size = %d×%d, %v", w, h, err)
	}
	if b, what, err := Resident(src, under(dir)); err != nil || !strings.Contains(what, "remote cache") || b < int64(sceneW*sceneH) {
		t.Fatalf("Resident = %d %q %v", b, what, err)
	}
	remote.Reset(1 << 20)
	s.Deny.Store(true)
	_, err = Open(src, under(dir))
	check(err, "s3://pipe/rasters/scene.tif: access denied")
	_, _, err = Size(src, under(dir))
	check(err, "access denied")
}
