package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pipe/internal/s3test"
)

// TestRunTrainsFromS3 trains the olinda example a few steps from its
// files and from the same files on the local S3 server (20 ms a request,
// every third answered 503), pointing the source at s3:// with --set:
// the step losses are equal, as the batches are, and the report names
// the URL but no key.
func TestRunTrainsFromS3(t *testing.T) {
	root, _ := filepath.Abs("../..")
	objs := map[string][]byte{}
	for _, n := range []string{"L7_ETMs.tif", "olinda_dem_utm25s.tif"} {
		b, err := os.ReadFile(filepath.Join(root, "data", n))
		if err != nil {
			t.Skipf("the Landsat data (make data): %v", err)
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
	t.Setenv("PIPE_REMOTE_BACKOFF_MS", "1")
	dir := t.TempDir()
	t.Chdir(root)
	run := func(name string, extra ...string) []float64 {
		t.Helper()
		ck := filepath.Join(dir, name)
		args := append([]string{"run", "--device", "cpu", "--engine", "native", "--threads", "1", "--max-steps", "3",
			"--checkpoint-dir", ck, "--set", "train.batch=8", "--set", "train.effective_batch=8",
			"--set", `predict.write="` + filepath.Join(dir, name+".tif") + `"`}, extra...)
		code, _, stderr := runPipe(t, "", append(args, "examples/olinda.pipe")...)
		if code != exitOK {
			t.Fatalf("%s: exit %d\n%s", name, code, stderr)
		}
		b, err := os.ReadFile(filepath.Join(ck, "report.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{s3test.AccessKey, s3test.SecretKey} {
			if strings.Contains(string(b), k) || strings.Contains(stderr, k) {
				t.Errorf("%s: the report or the output shows a key", name)
			}
		}
		var r struct {
			StepLosses []float64 `json:"step_losses"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return r.StepLosses
	}
	local := run("local")
	s.Latency.Store(int64(20 * time.Millisecond))
	s.FailEvery.Store(3)
	remote := run("s3", "--set", `source.scene.path="`+s.URL("landsat/L7_ETMs.tif")+`"`,
		"--set", `source.scene.target="`+s.URL("landsat/olinda_dem_utm25s.tif")+`"`)
	if len(local) != 3 || len(remote) != 3 {
		t.Fatalf("step losses: local %v, s3 %v", local, remote)
	}
	for i := range local {
		if local[i] != remote[i] {
			t.Errorf("step %d: loss %v from the file, %v from s3://", i+1, local[i], remote[i])
		}
	}
	if s.Failed.Load() == 0 {
		t.Error("no request failed")
	}
}
