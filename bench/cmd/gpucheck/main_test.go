package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"pipe/internal/torchtest"
	"pipe/planner/plan"
)

// TestMemoryErrors: the peak phase's reserved estimate is held against
// max_memory_reserved and the total against the device's used memory.
func TestMemoryErrors(t *testing.T) {
	m := plan.Memory{Total: 1500, PeakPhase: plan.PhaseBackward, Phases: []plan.MemoryPhase{
		{Name: plan.PhaseForward, Allocated: 700, Reserved: 800, Device: 1300},
		{Name: plan.PhaseBackward, Allocated: 900, Reserved: 1000, Device: 1500}}}
	rsv, alloc, ph := estimates(m)
	if rsv != 1000 || alloc != 900 || ph != plan.PhaseBackward {
		t.Fatalf("estimates: %d %d %s", rsv, alloc, ph)
	}
	r := Result{Example: "x", EstimatedBytes: 1500, EstimatedReservedBytes: rsv, EstimatedAllocatedBytes: alloc, PeakPhase: ph,
		MaxReservedBytes: 800, DeviceUsedBytes: 2000, ErrorReservedPercent: errorPercent(rsv, 800), ErrorUsedPercent: errorPercent(1500, 2000)}
	var b bytes.Buffer
	printMemory(&b, []Result{r})
	if out := b.String(); !strings.Contains(out, "+25.0%") || !strings.Contains(out, "-25.0%") {
		t.Errorf("the errors are not printed:\n%s", out)
	}
	if errorPercent(1, 0) != nil {
		t.Error("an error against nothing measured")
	}
}

// TestSmokeSaysNoGPU: make gpu-smoke, run from a bundle on a machine whose
// nvidia-smi lists no GPU, says so and exits 2 before it writes anything.
func TestSmokeSaysNoGPU(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"bin/pipe-static", "bin/gpucheck", "bench/gpu/smoke_json.py", "bench/gpu/resnet50_plain.py", "bench/gpu/mlp_split.py"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fake := filepath.Join(dir, "fakebin")
	if err := os.MkdirAll(fake, 0o755); err != nil {
		t.Fatal(err)
	}
	smi := "#!/bin/sh\necho 'No devices were found'\nexit 6\n"
	if err := os.WriteFile(filepath.Join(fake, "nvidia-smi"), []byte(smi), 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("../../gpu/smoke.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script, "out")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+fake+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "no GPU here") {
		t.Fatalf("smoke.sh without a GPU: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("smoke.sh wrote its output folder without a GPU: %v", err)
	}
}

// smokeTree lays out in a temporary folder what make gpu-smoke runs from
// (bin/, examples/, bench/gpu/), bench/gpu a folder of its own so that
// the report lands there; bins maps bin/NAME to a file's contents, or to
// "" for a static build of the package ./cmd/NAME or ./bench/cmd/NAME.
func smokeTree(t *testing.T, bins map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bench", "gpu"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "examples"), filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "bench", "gpu", "*"))
	for _, f := range files {
		if err := os.Symlink(f, filepath.Join(dir, "bench", "gpu", filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range bins {
		out := filepath.Join(dir, "bin", name)
		if body != "" {
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(out, []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		pkg := map[string]string{"pipe-static": "./cmd/pipe", "gpucheck": "./bench/cmd/gpucheck"}[name]
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	return dir
}

// packMembers lists the pack's members under gpu-smoke/ and returns the
// contents of those named in read.
func packMembers(t *testing.T, path string, read ...string) (map[string]bool, map[string][]byte) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the pack: %v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	names, bodies := map[string]bool{}, map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(h.Name, "gpu-smoke/")
		names[name] = true
		if slices.Contains(read, name) {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			bodies[name] = b
		}
	}
	return names, bodies
}

// TestSmokeDryRunPacks: make gpu-smoke's CPU dry run (its steps at tiny
// sizes, one example) ends with one file in the pack folder, which holds
// every step's output, ResNet-50's rows first in the step table, the
// hand-written MLP beside pipe's and the host-to-device record. It takes
// minutes on two cores (ResNet-50 on the CPU), so make test leaves it out:
// PIPE_SMOKE_DRY=1 runs it (make gpu-smoke-dry runs the script itself).
func TestSmokeDryRunPacks(t *testing.T) {
	if os.Getenv("PIPE_SMOKE_DRY") == "" {
		t.Skip("the smoke's CPU dry run takes minutes; PIPE_SMOKE_DRY=1 runs it")
	}
	py := torchtest.Python(t)
	dir := smokeTree(t, map[string]string{"pipe-static": "", "gpucheck": ""})
	cmd := exec.Command("bash", "bench/gpu/smoke.sh", "work")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PY="+py, "SMOKE_DEVICE=cpu", "SMOKE_PACK_DIR=pack", "SMOKE_EXAMPLES=examples/fashion_mlp.pipe",
		"SMOKE_RESNET_BATCH=2", "SMOKE_RESNET_STEPS=2", "SMOKE_PLAIN_STEPS=1", "SMOKE_PLAIN_WARMUP=1",
		"SMOKE_CHECK_STEPS=2", "SMOKE_WARMUP=1", "SMOKE_MLP_STEPS=2", "SMOKE_STEPS=2")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the dry run: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	entries, _ := os.ReadDir(filepath.Join(dir, "pack"))
	if len(entries) != 1 || entries[0].Name() != "gpu-smoke.tar.gz" {
		t.Fatalf("the pack folder holds %v, not one gpu-smoke.tar.gz", entries)
	}
	names, bodies := packMembers(t, filepath.Join(dir, "pack", "gpu-smoke.tar.gz"), "steps.tsv", "smoke.json")
	for _, m := range []string{"machine.txt", "env.log", "steps.tsv", "smoke.json", "resnet50_pipe.json", "resnet50_eager.json",
		"resnet50_compiled.json", "h2d.json", "gpucheck.json", "gpucheck.log", "mlp_split.json", "fresh.json", "resume.json",
		"worker/fashion_mlp.spec.json"} {
		if !names[m] {
			t.Errorf("the pack lacks %s", m)
		}
	}
	if names["ck/"] || names["worker/pipe_torch/"] {
		t.Error("the pack holds the checkpoints or the worker's package")
	}
	var order []string
	for _, ln := range strings.Split(strings.TrimSpace(string(bodies["steps.tsv"])), "\n") {
		order = append(order, strings.Split(ln, "\t")[0])
	}
	want := []string{"env", "resnet50_pipe", "resnet50_eager", "resnet50_compiled", "h2d", "gpucheck", "mlp_split", "fresh", "resume", "ckall"}
	if !slices.Equal(order, want) {
		t.Errorf("steps %v, want %v", order, want)
	}
	var rep struct {
		Runs     map[string]struct{ Steps int }
		ResNet50 struct {
			Eager struct {
				ImagesPerSecond float64 `json:"images_per_second"`
			}
		} `json:"resnet50"`
		MLP struct {
			Variants map[string]struct {
				MS float64 `json:"ms_per_step"`
			}
		} `json:"mlp_split"`
		H2D struct{ Path string } `json:"h2d"`
	}
	if err := json.Unmarshal(bodies["smoke.json"], &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Runs["resume"].Steps != 4 || rep.ResNet50.Eager.ImagesPerSecond <= 0 || rep.MLP.Variants["pipe_network"].MS <= 0 ||
		rep.MLP.Variants["hand_eager"].MS <= 0 || !strings.HasPrefix(rep.H2D.Path, "none") {
		t.Errorf("the report: %+v", rep)
	}
}

// TestSmokePacksAfterASignal: a smoke stopped by SIGTERM in the middle of
// a step (here a gpucheck that hangs) ends that step and still leaves
// its pack, with the report on what ran.
func TestSmokePacksAfterASignal(t *testing.T) {
	dir := smokeTree(t, map[string]string{"pipe-static": "#!/bin/sh\nexit 1\n", "gpucheck": "#!/bin/sh\nsleep 300\n"})
	cmd := exec.Command("bash", "bench/gpu/smoke.sh", "work")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PY=python3", "SMOKE_DEVICE=cpu", "SMOKE_PACK_DIR=pack")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The hanging step has begun once its log exists.
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(dir, "work", "resnet50_pipe.log")); err == nil {
			break
		}
		if i == 600 {
			cmd.Process.Kill()
			t.Fatalf("the smoke never reached gpucheck:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 143 {
		t.Fatalf("smoke.sh after SIGTERM: %v\n%s", err, out.String())
	}
	names, _ := packMembers(t, filepath.Join(dir, "pack", "gpu-smoke.tar.gz"))
	for _, m := range []string{"steps.tsv", "env.log", "machine.txt", "resnet50_pipe.log", "smoke.json"} {
		if !names[m] {
			t.Errorf("the pack lacks %s:\n%s", m, out.String())
		}
	}
}

// TestGraphRan: a row records a CUDA graph only where the worker reports
// one captured, not where it is pending, kept off or failed.
func TestGraphRan(t *testing.T) {
	for a, want := range map[string]bool{"captured after 3 eager steps; capturable optimizer": true,
		"pending: captured after 3 eager steps of 128": false, "eager (PIPE_TORCH_GRAPH=off)": false,
		"eager (capture failed: RuntimeError: x)": false, "": false} {
		if got := graphRan(map[string]string{"cuda_graph": a}); got != want {
			t.Errorf("graphRan(%q) = %v, want %v", a, got, want)
		}
	}
}
