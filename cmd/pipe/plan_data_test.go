package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pipe/dataset/remote"
	"pipe/internal/s3test"
)

// TestPlanRefusesWhatRunRefuses: a missing file and a model input the
// data does not have fail pipe plan (exit 1) with the diagnostic the run
// gives, word for word, at the same place; the plan is still shown, for
// what it says of the device, and no plan file is written.
func TestPlanRefusesWhatRunRefuses(t *testing.T) {
	root, _ := filepath.Abs("../..")
	if _, err := os.Stat(filepath.Join(root, "data", "fashion-mnist", "train-images-idx3-ubyte.gz")); err != nil {
		t.Skipf("Fashion-MNIST (make data): %v", err)
	}
	t.Chdir(root)
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		set  string
		want []string
	}{
		{"missing", `source.train.images="` + filepath.Join(dir, "nope.gz") + `"`,
			[]string{"examples/fashion.pipe:4:20: error: cannot read source train [data]", "nope.gz: file not found"}},
		{"shape", "model.fashion.input=[3,28,28]",
			[]string{"error: the model's input does not match the data [data-shape]",
				"Source train (line 4) gives samples of shape [1, 28, 28]; model fashion takes [3, 28, 28]."}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, c.name+".json")
			code, stdout, plan := runPipe(t, "", "plan", "--device", "cpu", "--out", out, "--set", c.set, "examples/fashion.pipe")
			if code != exitErrors {
				t.Fatalf("plan: exit %d, want %d\n%s", code, exitErrors, plan)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("plan wrote the plan file of a run it refuses")
			}
			if !strings.Contains(stdout, "Memory at batch") {
				t.Errorf("plan: no table\n%s", stdout)
			}
			code, _, ran := runPipe(t, "", "run", "--device", "cpu", "--engine", "native", "--max-steps", "1",
				"--checkpoint-dir", filepath.Join(dir, c.name), "--set", c.set, "examples/fashion.pipe")
			if code != exitErrors {
				t.Fatalf("run: exit %d, want %d\n%s", code, exitErrors, ran)
			}
			for _, want := range c.want {
				if !strings.Contains(oneLine(plan), want) || !strings.Contains(oneLine(ran), want) {
					t.Errorf("want %q from plan and run\nplan:\n%s\nrun:\n%s", want, plan, ran)
				}
			}
		})
	}
	// pipe check stays static: it reads no data.
	if code, _, stderr := runPipe(t, "", "check", "--set", `source.train.images="`+filepath.Join(dir, "nope.gz")+`"`, "examples/fashion.pipe"); code != exitOK {
		t.Errorf("check: exit %d\n%s", code, stderr)
	}
}

// TestPlanOnStalledStore: olinda's scene on the S3 fake, which answers
// nothing for ten minutes. pipe plan and pipe run fail (exit 1) naming
// the URL and PIPE_REMOTE_TIMEOUT, which takes a Go duration, after one
// object's 1 + PIPE_REMOTE_RETRIES requests: the plan does not read the
// failed source again for its counts and memory. A missing object fails
// them the same way, at once.
func TestPlanOnStalledStore(t *testing.T) {
	root, _ := filepath.Abs("../..")
	b, err := os.ReadFile(filepath.Join(root, "data", "L7_ETMs.tif"))
	if err != nil {
		t.Skipf("the Landsat data (make data): %v", err)
	}
	s, err := s3test.Start(map[string][]byte{"landsat/L7_ETMs.tif": b})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for k, v := range s.Env() {
		t.Setenv(k, v)
	}
	t.Setenv("PIPE_REMOTE_TIMEOUT", "100ms")
	t.Setenv("PIPE_REMOTE_RETRIES", "1")
	t.Setenv("PIPE_REMOTE_BACKOFF_MS", "1")
	remote.Reset(-1)
	t.Cleanup(func() { remote.Reset(-1) })
	t.Chdir(root)
	dir := t.TempDir()
	scene := s.URL("landsat/L7_ETMs.tif")
	args := func(cmd, path string) []string {
		a := []string{cmd, "--device", "cpu", "--set", `source.scene.path="` + path + `"`}
		if cmd == "run" {
			a = append(a, "--engine", "native", "--max-steps", "1", "--checkpoint-dir", filepath.Join(dir, "ck"),
				"--set", `predict.write="`+filepath.Join(dir, "p.tif")+`"`)
		}
		return append(a, "examples/olinda.pipe")
	}
	s.Latency.Store(int64(10 * time.Minute))
	for _, cmd := range []string{"plan", "run"} {
		before := s.Requests.Load()
		code, _, stderr := runPipe(t, "", args(cmd, scene)...)
		if code != exitErrors {
			t.Fatalf("%s: exit %d, want %d\n%s", cmd, code, exitErrors, stderr)
		}
		for _, want := range []string{"cannot read source scene", scene, "no complete answer within 100ms (PIPE_REMOTE_TIMEOUT)", "gave up after 2 tries"} {
			if !strings.Contains(oneLine(stderr), want) {
				t.Errorf("%s: want %q in\n%s", cmd, want, stderr)
			}
		}
		if n := s.Requests.Load() - before; n != 2 {
			t.Errorf("%s: %d requests to the stalled store, want 2 (1 + PIPE_REMOTE_RETRIES)", cmd, n)
		}
	}
	s.Latency.Store(0)
	missing := s.URL("landsat/nope.tif")
	for _, cmd := range []string{"plan", "run"} {
		code, _, stderr := runPipe(t, "", args(cmd, missing)...)
		if code != exitErrors || !strings.Contains(oneLine(stderr), missing+": no such object") {
			t.Errorf("%s of a missing object: exit %d\n%s", cmd, code, stderr)
		}
	}
}

// oneLine is s with its line breaks and indents, which the diagnostics'
// wrapping puts anywhere, as single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// inRoot makes the repository's root the working directory for the rest
// of the test, as the examples' data paths (data/...) expect: pipe plan
// reads them as the run does.
func inRoot(t *testing.T) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
}
