package dataset

import (
	"image/color"
	"math"
	"slices"
	"strings"
	"testing"

	"pipe/dataset/internal/datatest"
	"pipe/dataset/remote"
	"pipe/internal/progtest"
	"pipe/internal/s3test"
)

// sameSamples fails unless a and b hold the same samples, bit for bit.
func sameSamples(t *testing.T, what string, a, b Dataset) {
	t.Helper()
	ax, ay, _ := datatest.ReadAll(t, a)
	bx, by, _ := datatest.ReadAll(t, b)
	if len(ax) != len(bx) || len(ax) == 0 {
		t.Fatalf("%s: %d samples from s3://, %d from the files", what, len(bx), len(ax))
	}
	for i := range ax {
		for j := range ax[i] {
			if math.Float32bits(ax[i][j]) != math.Float32bits(bx[i][j]) {
				t.Fatalf("%s: sample %d input %d differs", what, i, j)
			}
		}
		if !slices.Equal(ay[i], by[i]) {
			t.Fatalf("%s: sample %d target differs", what, i)
		}
	}
}

// TestFileSourcesFromS3: idx (gzipped images), csv and images sources
// (class folders, and images with masks) read from the in-process S3,
// with every third request answered 503, give the samples their local
// files give, and CountSamples counts as many; a second open
// downloads nothing (one listing or one HEAD checks the copies); a
// missing object names its URL and no key.
func TestFileSourcesFromS3(t *testing.T) {
	dir, _, _ := idxFixture(t, 6, 4, 3)
	datatest.WriteFile(t, dir, "t.csv", []byte("a,b,kind\n1,2,x\n3,4,y\n5,6,x\n7,8.5,y\n"))
	pets := imageFolder(t)
	seg := t.TempDir()
	datatest.WriteFile(t, seg, "img/a.png", pngBytes(t, uniform(16, 16, color.RGBA{10, 20, 30, 255})))
	datatest.WriteFile(t, seg, "img/b.png", pngBytes(t, uniform(16, 16, color.RGBA{40, 50, 60, 255})))
	datatest.WriteFile(t, seg, "msk/a.png", pngBytes(t, uniform(16, 16, color.RGBA{255, 255, 255, 255})))
	datatest.WriteFile(t, seg, "msk/b.png", pngBytes(t, uniform(16, 16, color.RGBA{0, 0, 0, 255})))

	s, err := s3test.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for k, v := range s.Env() {
		t.Setenv(k, v)
	}
	t.Setenv("PIPE_REMOTE_BACKOFF_MS", "1")
	t.Setenv("PIPE_REMOTE_CACHE_DIR", t.TempDir())
	remote.Reset(-1)
	defer remote.Reset(-1)
	putFolder(t, s, dir, "mnist")
	putFolder(t, s, pets, "pets")
	putFolder(t, s, seg, "seg")
	u := "s3://" + s3test.Bucket + "/"
	cases := []struct{ what, local, url, base string }{
		{"idx", `source s idx { images "img.gz"  labels "lab" }`,
			`source s idx { images "` + u + `mnist/img.gz"  labels "` + u + `mnist/lab" }`, dir},
		{"csv", `source s csv { path "t.csv"  label kind }`,
			`source s csv { path "` + u + `mnist/t.csv"  label kind }`, dir},
		{"images", `source s images { path "pets"  resize 8x8  strict false }`,
			`source s images { path "` + u + `pets/pets/"  resize 8x8  strict false }`, pets},
		{"masks", `source s images { path "img"  masks "msk"  resize 8x8 }`,
			`source s images { path "` + u + `seg/img"  masks "` + u + `seg/msk"  resize 8x8 }`, seg},
	}
	s.FailEvery.Store(3)
	for _, c := range cases {
		want, err := Open(progtest.Source(t, c.local), WithBase(c.base))
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		got, err := Open(progtest.Source(t, c.url), WithBase(c.base))
		if err != nil {
			t.Fatalf("%s from s3: %v", c.what, err)
		}
		sameSamples(t, c.what, want, got)
		n, err := CountSamples(progtest.Source(t, c.url), WithBase(c.base))
		ln, _ := CountSamples(progtest.Source(t, c.local), WithBase(c.base))
		if err != nil || n != ln {
			t.Errorf("%s: CountSamples %+v (%v) from s3://, %+v from the files", c.what, n, err, ln)
		}
		if c.what == "images" {
			if names := got.(ClassNamer).ClassNames(); !slices.Equal(names, []string{"cat", "dog"}) {
				t.Errorf("classes %v", names)
			}
			if name := got.(SampleNamer).SampleName(0); !strings.HasPrefix(name, u+"pets/pets/cat/") {
				t.Errorf("sample 0 is named %s, want its URL", name)
			}
		}
	}
	if s.Failed.Load() == 0 {
		t.Error("no request failed: the retries were not exercised")
	}
	s.Reset()
	before := remote.ReadStats().Bytes
	for _, c := range cases {
		if _, err := Open(progtest.Source(t, c.url), WithBase(c.base)); err != nil {
			t.Fatalf("%s again: %v", c.what, err)
		}
	}
	if got := remote.ReadStats().Bytes - before; got != 0 {
		t.Errorf("opening again downloaded %d bytes, want 0", got)
	}
	_, err = Open(progtest.Source(t, `source s csv { path "`+u+`none.csv"  label kind }`))
	datatest.WantErr(t, err, u+"none.csv", "no such object")
	noKey := err.Error()
	_, err = Open(progtest.Source(t, `source s images { path "`+u+`nothing/" }`))
	datatest.WantErr(t, err, u+"nothing", "no such object")
	for _, e := range []string{noKey, err.Error()} {
		if strings.Contains(e, s3test.SecretKey) || strings.Contains(e, s3test.AccessKey) {
			t.Errorf("a key leaked: %s", e)
		}
	}
}
