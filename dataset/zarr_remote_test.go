package dataset

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pipe/dataset/internal/datatest"
	"pipe/dataset/remote"
	"pipe/internal/progtest"
	"pipe/internal/s3test"
)

// putFolder puts every file under dir on the server under prefix.
func putFolder(t *testing.T, s *s3test.Server, dir, prefix string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		return s.Put(prefix+"/"+filepath.ToSlash(rel), b)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestZarrFromS3 reads Zarr arrays by key from the local S3 server,
// plain, with latency and every third request answered 503: the windows
// equal the local folder's bit for bit, a chunk never written still
// reads as the fill value, and a missing array or a denied request is
// an error naming the URL and never the keys.
func TestZarrFromS3(t *testing.T) {
	dir := t.TempDir()
	const d, h, w = 4, 6, 5
	x := ramp(2*d*h*w, 1, 1e6)
	y := make([]float32, d*h*w)
	for i := range y {
		y[i] = float32(i % 3)
	}
	if err := WriteZarr(filepath.Join(dir, "x.zarr"), []int{2, d, h, w}, []int{1, 2, 4, 4}, "<f4", "zstd", x); err != nil {
		t.Fatal(err)
	}
	if err := WriteZarr(filepath.Join(dir, "y.zarr"), []int{d, h, w}, []int{2, 3, 5}, "|u1", "zlib", y); err != nil {
		t.Fatal(err)
	}
	// A chunk never written reads as fill_value (0).
	if err := os.Remove(filepath.Join(dir, "y.zarr", "1.1.0")); err != nil {
		t.Fatal(err)
	}
	s, err := s3test.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for k, v := range s.Env() {
		t.Setenv(k, v)
	}
	t.Setenv("PIPE_REMOTE_BACKOFF_MS", "1")
	putFolder(t, s, dir, "vol")
	src := func(base string) string {
		return `source s zarr {
  path "` + base + `x.zarr"
  target "` + base + `y.zarr"
  window [2, 4, 3] stride [2, 2, 2]
  normalize standard
}`
	}
	ds, err := Open(progtest.Source(t, src("")), WithBase(dir))
	if err != nil {
		t.Fatal(err)
	}
	wantX, wantY, _ := datatest.ReadAll(t, ds)
	for _, fault := range []string{"plain", "latency", "503"} {
		s.Reset()
		switch fault {
		case "latency":
			s.Latency.Store(int64(20 * time.Millisecond))
		case "503":
			s.FailEvery.Store(3)
		}
		rds, err := Open(progtest.Source(t, src("s3://"+s3test.Bucket+"/vol/")), WithBase(dir))
		if err != nil {
			t.Fatalf("%s: %v", fault, err)
		}
		gx, gy, _ := datatest.ReadAll(t, rds)
		if len(gx) != len(wantX) {
			t.Fatalf("%s: %d windows, local %d", fault, len(gx), len(wantX))
		}
		for i := range wantX {
			for j := range wantX[i] {
				if math.Float32bits(gx[i][j]) != math.Float32bits(wantX[i][j]) {
					t.Fatalf("%s: window %d input %d differs from the local folder's", fault, i, j)
				}
			}
			for j := range wantY[i] {
				if math.Float32bits(gy[i][j]) != math.Float32bits(wantY[i][j]) {
					t.Fatalf("%s: window %d target %d differs from the local folder's", fault, i, j)
				}
			}
		}
		if fault == "503" && s.Failed.Load() == 0 {
			t.Errorf("no request failed")
		}
	}
	s.Reset()
	_, err = ReadZarr("s3://" + s3test.Bucket + "/vol/none.zarr")
	if err == nil || !strings.Contains(err.Error(), "s3://"+s3test.Bucket+"/vol/none.zarr") || !strings.Contains(err.Error(), "no .zarray") {
		t.Errorf("missing array: %v", err)
	}
	s.Deny.Store(true)
	_, err = ReadZarr("s3://" + s3test.Bucket + "/vol/x.zarr")
	if err == nil || !errors.Is(err, remote.ErrDenied) || !strings.Contains(err.Error(), "s3://"+s3test.Bucket+"/vol/x.zarr") {
		t.Errorf("denied: %v", err)
	}
	if err != nil && (strings.Contains(err.Error(), s3test.SecretKey) || strings.Contains(err.Error(), s3test.AccessKey)) {
		t.Errorf("the error shows a key: %v", err)
	}
}
