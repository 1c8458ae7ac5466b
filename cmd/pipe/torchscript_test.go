package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pipe/engine/native"
	"pipe/export/torchscript"
	"pipe/internal/memrun"
	"pipe/internal/onnxtest"
	"pipe/internal/progtest"
	"pipe/run"
	"pipe/run/folder"
)

// loadTorchScript is the fresh Python that runs the exported files: for
// each job it loads the file with torch.jit.load and its pipe.json, runs
// the model on the job's inputs (little-endian float32) and on the first
// sample alone, and writes the outputs and the metadata back. It fails
// when anything of pipe's was imported: the files need torch alone.
const loadTorchScript = `
import json, sys, torch
jobs = json.load(open(sys.argv[1]))
for j in jobs:
    extra = {"pipe.json": ""}
    m = torch.jit.load(j["file"], _extra_files=extra)
    meta = json.loads(extra["pipe.json"])
    x = torch.frombuffer(bytearray(open(j["x"], "rb").read()), dtype=torch.float32)
    x = x.reshape([j["n"]] + meta["input_shape"])
    with torch.no_grad():
        y = m(x)
        y1 = m(x[:1])
    open(j["out"], "wb").write(torch.cat([y.reshape(-1), y1.reshape(-1)]).numpy().tobytes())
    json.dump(meta, open(j["out"] + ".json", "w"))
bad = [k for k in sys.modules if k.split(".")[0] in ("pipe_torch", "pipe")]
assert not bad, bad
`

// TestExportTorchScript trains fashion, fashion_mlp, olinda (a U-Net, a
// regression whose outputs are restored to metres) and vit_fashion
// (attention) two steps on their real data with the native engine, exports
// each checkpoint with pipe export --torchscript, and runs the files in a
// fresh Python (PYTHONPATH cleared, another working folder, no pipe code
// importable) on the first training batch, normalised as training
// normalised it. Its outputs are pipe predict's (run.Trained.Predict on
// the native engine, which predict uses on the CPU) within 1e-5 of their
// largest magnitude, for the whole batch and for its first sample alone
// (the batch axis is free), and its pipe.json holds the normalisation and
// the shapes.
func TestExportTorchScript(t *testing.T) {
	py := torchPython(t)
	fixedHost(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := memrun.Prepare(root, dir); err != nil {
		t.Fatal(err)
	}
	type job struct {
		File string `json:"file"`
		X    string `json:"x"`
		N    int    `json:"n"`
		Out  string `json:"out"`
		want []float32
		tr   *run.Trained
	}
	var jobs []*job
	for _, name := range []string{"fashion", "fashion_mlp", "olinda", "vit_fashion"} {
		const n = 4
		src, err := os.ReadFile(filepath.Join(root, "examples", name+".pipe"))
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, name+".pipe")
		prog, p := planExample(t, file, src, n)
		ckpt := filepath.Join(dir, "ckpt", name)
		// Two steps; the run stops there, before its evaluation.
		ctx, cancel := context.WithCancel(context.Background())
		stop := run.Hooks{Step: func(s run.StepInfo) {
			if s.Step >= 2 {
				cancel()
			}
		}}
		res, ds := run.Run(ctx, p, progtest.Decoded(t, prog), stop, run.WithBackend(native.Backend{}), run.WithMaxSteps(2),
			run.WithCheckpointDir(ckpt), run.WithBase(dir))
		cancel()
		if ds.HasErrors() || res.Position.Step != 2 {
			t.Fatalf("%s: %d steps trained\n%v", name, res.Position.Step, ds)
		}
		last := filepath.Join(ckpt, folder.LastCheckpoint)
		out := filepath.Join(dir, name+".pt")
		code, stdout, stderr := runPipe(t, "", "export", file, "--checkpoint", last, "--torchscript", out, "--python", py)
		if code != exitOK {
			t.Fatalf("%s: pipe export: exit %d\n%s%s", name, code, stdout, stderr)
		}
		if !strings.Contains(stdout, "traced in evaluation mode") {
			t.Errorf("%s: pipe export says\n%s", name, stdout)
		}
		tr, err := run.LoadTrained(p, progtest.Decoded(t, prog), last, native.Backend{}, n, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		bs, err := tr.CalibrationBatches(context.Background(), dir, 1)
		if err != nil {
			t.Fatal(err)
		}
		b := bs[0]
		want := make([]float32, b.N*numel64(tr.Info.OutputShape))
		if err := tr.Predict(b.X, b.N, want); err != nil {
			t.Fatal(err)
		}
		j := &job{File: out, X: filepath.Join(dir, name+".x"), N: b.N, Out: filepath.Join(dir, name+".y"), want: want, tr: tr}
		writeFloats(t, j.X, b.X)
		jobs = append(jobs, j)
	}

	list := filepath.Join(dir, "jobs.json")
	js, _ := json.Marshal(jobs)
	if err := os.WriteFile(list, js, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", loadTorchScript, list)
	cmd.Dir = t.TempDir()
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PYTHONPATH=") })
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("a fresh Python: %v\n%s", err, out)
	}
	for _, j := range jobs {
		name := strings.TrimSuffix(filepath.Base(j.File), ".pt")
		got := readFloats(t, j.Out)
		per := numel64(j.tr.Info.OutputShape)
		if len(got) != len(j.want)+per {
			t.Fatalf("%s: %d outputs, want %d and %d", name, len(got), len(j.want), per)
		}
		scale := onnxtest.Largest(j.want)
		d, d1 := onnxtest.MaxDiff(got[:len(j.want)], j.want), onnxtest.MaxDiff(got[len(j.want):], j.want[:per])
		if !(d <= 1e-5*scale) || !(d1 <= 1e-5*scale) {
			t.Errorf("%s: TorchScript and predict differ by up to %.3g (the first sample alone %.3g); largest output %.3g", name, d, d1, scale)
		}
		t.Logf("%-12s batch %d: largest difference %.3g, %.2g of the largest output %.3g", name, j.N, d, d/scale, scale)
		var md torchscript.Metadata
		if js, err := os.ReadFile(j.Out + ".json"); err != nil || json.Unmarshal(js, &md) != nil {
			t.Fatalf("%s: pipe.json: %v", name, err)
		}
		want := torchscript.MetadataOf(j.tr, md.Producer)
		if md.Pipeline != want.Pipeline || !slices.Equal(md.InputShape, want.InputShape) || !slices.Equal(md.OutputShape, want.OutputShape) ||
			!slices.Equal(md.InputMean, want.InputMean) || !slices.Equal(md.InputStd, want.InputStd) || len(md.InputMean) == 0 ||
			md.TargetRestored != (j.tr.Info.Target != nil) {
			t.Errorf("%s: pipe.json says %+v, want %+v", name, md, want)
		}
	}
}

// TestExportTorchScriptNamesTheOp: a model with an op that torch cannot
// trace (the worker's stand-in: relu reading a Python float from its
// output, which a trace freezes) is refused, naming the node, its op and
// the tracer's reason, and nothing is written.
func TestExportTorchScriptNamesTheOp(t *testing.T) {
	py := torchPython(t)
	t.Setenv("PIPE_TORCH_FAKE_UNTRACEABLE", "relu")
	dir, file := tiny(t, strings.Replace(tinyPipe, "flatten -> dense 3", "flatten -> dense 8 -> relu -> dense 3", 1))
	if code, stdout, stderr := runPipe(t, "", runArgs(dir, "--max-steps", "1", file)...); code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", code, stdout, stderr)
	}
	out := filepath.Join(dir, "tiny.pt")
	code, _, stderr := runPipe(t, "", "export", file, "--checkpoint", filepath.Join(dir, "ckpt", folder.LastCheckpoint), "--torchscript", out, "--python", py)
	if code != exitErrors {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"(op relu) cannot be traced", "Python float", "nothing was written"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s was written", out)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".tiny.pt.*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

func writeFloats(t *testing.T, path string, v []float32) {
	t.Helper()
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFloats(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
