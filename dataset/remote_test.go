//go:build cgo

package dataset

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"pipe/dataset/remote"
	"pipe/internal/progtest"
	"pipe/internal/s3test"
)

// TestLandsatFromS3: the Landsat scene and its DEM read from s3:// on a
// local S3 server give the local files' training batches bit for bit,
// over two shuffled, augmented epochs with two workers, while the server
// adds 20 ms to every request and drops every third.
func TestLandsatFromS3(t *testing.T) {
	needFiles(t, "data/L7_ETMs.tif", "data/olinda_dem_utm25s.tif")
	objs := map[string][]byte{}
	for _, n := range []string{"L7_ETMs.tif", "olinda_dem_utm25s.tif"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, "data", n))
		if err != nil {
			t.Fatal(err)
		}
		objs["landsat/"+n] = b
	}
	s, err := s3test.Start(objs)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for k, v := range s.Env() {
		t.Setenv(k, v)
	}
	t.Setenv("PIPE_REMOTE_BLOCK_KB", "16")
	t.Setenv("PIPE_REMOTE_BACKOFF_MS", "1")
	// A cache smaller than the scene, so that the epochs' reads go to the
	// server rather than finding Open's statistics pass's blocks.
	remote.Reset(96 << 10)
	defer remote.Reset(-1)

	body := `bands [1, 2, 3, 4, 5, 6]  tile 64x64 stride 48  split 0.8 seed 7  normalize per_band  augment [flip_h, flip_v, rot90]`
	open := func(scene, target string) *Split {
		sp, err := OpenSplit(progtest.Source(t, fmt.Sprintf(`source scene geotiff { path %q  target %q  %s }`, scene, target, body)), WithBase(repoRoot))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sp.Close() })
		return sp
	}
	local := open("data/L7_ETMs.tif", "data/olinda_dem_utm25s.tif")
	s.Latency.Store(int64(20 * time.Millisecond))
	s.FailEvery.Store(3)
	s.DropConn.Store(true)
	rem := open(s.URL("landsat/L7_ETMs.tif"), s.URL("landsat/olinda_dem_utm25s.tif"))
	if _, ok := rem.Train.(Prefetcher); !ok {
		t.Fatal("the remote source's training part is not a Prefetcher")
	}
	before := remote.ReadStats()
	opt := LoaderOptions{BatchSize: 8, Shuffle: true, Seed: 3, Workers: 2, Prefetch: 2, Augment: []string{"flip_h", "flip_v", "rot90"}}
	ll, rl := NewLoader(local.Train, opt), NewLoader(rem.Train, opt)
	batches := 0
	for e := range 2 {
		li, ri := ll.Epoch(e), rl.Epoch(e)
		for {
			lb, lerr := li.Next(t.Context())
			rb, rerr := ri.Next(t.Context())
			if lerr != nil || rerr != nil {
				if lerr != rerr {
					t.Fatalf("epoch %d: local %v, remote %v", e, lerr, rerr)
				}
				break
			}
			batches++
			for name, pair := range map[string][2][]float32{"x": {lb.X, rb.X}, "y": {lb.Y, rb.Y}, "mask": {lb.Mask, rb.Mask}} {
				a, b := pair[0], pair[1]
				if len(a) != len(b) {
					t.Fatalf("epoch %d: %s lengths %d and %d", e, name, len(a), len(b))
				}
				for i := range a {
					if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
						t.Fatalf("epoch %d, batch %d: %s[%d] local %v, remote %v", e, batches, name, i, a[i], b[i])
					}
				}
			}
			li.Release(lb)
			ri.Release(rb)
		}
		li.Close()
		ri.Close()
	}
	st := remote.ReadStats().Sub(before)
	t.Logf("%d batches; remote during the epochs: %d requests (%d retried), %d KiB, %d block hits, %d misses, readers waited %v",
		batches, st.Requests, st.Retries, st.Bytes>>10, st.Hits, st.Misses, st.Wait)
	if st.Requests == 0 {
		t.Fatal("the epochs sent no request: the test does not exercise the remote reads")
	}
	if s.Failed.Load() == 0 {
		t.Fatal("no request failed: the fault was not injected")
	}
}
