package main

import (
	"compress/gzip"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/engine/costs"
	"pipe/engine/native"
	"pipe/internal/onnxtest"
	"pipe/internal/progtest"
	"pipe/lang"
	"pipe/planner"
	"pipe/run"
	"pipe/run/folder"
	"pipe/stdlib"
)

const exportSrc = `pipeline tiny
seed 3
source blobs synthetic { samples 96  shape [2, 8, 8]  classes 3  seed 5 }
model small {
  input [2, 8, 8]
  conv 4 k3 pad1 -> batchnorm -> relu -> maxpool 2
  flatten -> dense 3
}
train { epochs 1  batch 16  optimizer adam lr 0.01  loss cross_entropy  metrics [accuracy] }
`

// pipe export writes a trained model that onnxruntime runs to the outputs
// LoadTrained's Predict gives, and says what it wrote; a checkpoint of
// another model and a bad opset are refused, and nothing is written.
func TestExportCommand(t *testing.T) {
	fixedHost(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "tiny.pipe")
	if err := os.WriteFile(file, []byte(exportSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runPipe(t, "", append(runArgs(dir, "--max-steps", "2"), file)...); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	out := filepath.Join(dir, "tiny.onnx")
	code, stdout, stderr := runPipe(t, "", "export", file, "--checkpoint-dir", filepath.Join(dir, "ckpt"), "--onnx", out)
	if code != exitOK {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"ONNX opset 17", `input  "input" [batch, 2, 8, 8]`, `output "output" [batch, 3]`, "1 batchnorm folded", "last.ckpt"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("export's output lacks %q:\n%s", want, stdout)
		}
	}

	// The other model's checkpoint, and opset 16: refused, nothing written.
	other := filepath.Join(dir, "other.pipe")
	os.WriteFile(other, []byte(strings.Replace(exportSrc, "conv 4 k3", "conv 5 k3", 1)), 0o644)
	bad := filepath.Join(dir, "bad.onnx")
	if code, _, stderr := runPipe(t, "", "export", other, "--checkpoint", filepath.Join(dir, "ckpt", folder.LastCheckpoint), "--onnx", bad); code != exitErrors || !strings.Contains(stderr, "does not fit") {
		t.Errorf("another model's checkpoint: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runPipe(t, "", "export", file, "--checkpoint-dir", filepath.Join(dir, "ckpt"), "--onnx", bad, "--opset", "16"); code != exitErrors || !strings.Contains(stderr, "opset 16") {
		t.Errorf("opset 16: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runPipe(t, "", "export", file); code != exitErrors || !strings.Contains(stderr, "usage") {
		t.Errorf("no --onnx: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Error("a refused export wrote its file")
	}

	ort := onnxtest.Runtime(t)
	f, _ := lang.Parse(file, []byte(exportSrc))
	prog, _ := lang.Check(f, stdlib.Schema())
	p, _ := planner.Plan(progtest.Decoded(t, prog), planner.WithCosts(costs.Engines()...), planner.WithSource([]byte(exportSrc)), planner.WithDevice("cpu"))
	tr, err := run.LoadTrained(p, progtest.Decoded(t, prog), filepath.Join(dir, "ckpt", folder.LastCheckpoint), native.Backend{}, 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	r := rand.New(rand.NewPCG(4, 5))
	x := make([]float32, 5*128)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	want := make([]float32, 5*3)
	if err := tr.Predict(x, 5, want); err != nil {
		t.Fatal(err)
	}
	outs, _ := ort.Run(t, out, onnxtest.Batch{X: x, N: 5, Shape: []int64{2, 8, 8}})
	for i := range want {
		if d := math.Abs(float64(outs[0][i] - want[i])); d > 1e-4 {
			t.Fatalf("output %d: onnxruntime %g, pipe %g", i, outs[0][i], want[i])
		}
	}
}

// A gan run's checkpoint exports its generator: LoadTrained leaves the
// discriminator's tensors out.
func TestExportGANGenerator(t *testing.T) {
	if _, err := os.Stat("../../data/L7_ETMs.tif"); err != nil {
		t.Skip("the Landsat scene is not in data/ (make run fetches it)")
	}
	fixedHost(t)
	t.Chdir("../..")
	dir := t.TempDir()
	file := filepath.Join("examples", "pix2pix_bands.pipe")
	if code, _, stderr := runPipe(t, "", append(runArgs(dir, "--max-steps", "1"), file)...); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	out := filepath.Join(dir, "g.onnx")
	code, stdout, stderr := runPipe(t, "", "export", file, "--checkpoint-dir", filepath.Join(dir, "ckpt"), "--onnx", out)
	if code != exitOK || !strings.Contains(stdout, "model g_unet") || !strings.Contains(stdout, `output "output" [batch, 1, 32, 32]`) {
		t.Fatalf("export: exit %d\n%s%s", code, stdout, stderr)
	}
	ort := onnxtest.Runtime(t)
	x := make([]float32, 2*3*32*32)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)))
	}
	outs, dims := ort.Run(t, out, onnxtest.Batch{X: x, N: 2, Shape: []int64{3, 32, 32}})
	if len(outs[0]) != 2*32*32 || len(dims[0]) != 4 || dims[0][0] != 2 {
		t.Fatalf("onnxruntime's output: dims %v, %d values", dims[0], len(outs[0]))
	}
	src, _ := os.ReadFile(file)
	f, _ := lang.Parse(file, src)
	prog, _ := lang.Check(f, stdlib.Schema())
	p, _ := planner.Plan(progtest.Decoded(t, prog), planner.WithCosts(costs.Engines()...), planner.WithSource(src), planner.WithDevice("cpu"))
	tr, err := run.LoadTrained(p, progtest.Decoded(t, prog), filepath.Join(dir, "ckpt", folder.LastCheckpoint), native.Backend{}, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	want := make([]float32, 2*32*32)
	if err := tr.Predict(x, 2, want); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if d := math.Abs(float64(outs[0][i] - want[i])); d > 1e-4*max(1, math.Abs(float64(want[i]))) {
			t.Fatalf("output %d: onnxruntime %g, pipe %g", i, outs[0][i], want[i])
		}
	}
}

// The Fashion-MNIST CNN, trained two steps on the real data and exported,
// gives in onnxruntime what pipe predicts on the test set's first batch
// (the first 64 images, normalised as training normalised them).
func TestExportFashionFirstTestBatch(t *testing.T) {
	images := "../../data/fashion-mnist/t10k-images-idx3-ubyte.gz"
	if _, err := os.Stat(images); err != nil {
		t.Skip("Fashion-MNIST is not in data/ (make data fetches it)")
	}
	ort := onnxtest.Runtime(t)
	fixedHost(t)
	t.Chdir("../..")
	dir := t.TempDir()
	file := filepath.Join("examples", "fashion.pipe")
	if code, _, stderr := runPipe(t, "", append(runArgs(dir, "--max-steps", "2"), file)...); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	out := filepath.Join(dir, "fashion.onnx")
	if code, stdout, stderr := runPipe(t, "", "export", file, "--checkpoint-dir", filepath.Join(dir, "ckpt"), "--onnx", out); code != exitOK || !strings.Contains(stdout, "2 batchnorms folded") {
		t.Fatalf("export: exit %d\n%s%s", code, stdout, stderr)
	}
	const n = 64
	x := firstImages(t, "data/fashion-mnist/t10k-images-idx3-ubyte.gz", n)
	src, _ := os.ReadFile(file)
	f, _ := lang.Parse(file, src)
	prog, _ := lang.Check(f, stdlib.Schema())
	p, _ := planner.Plan(progtest.Decoded(t, prog), planner.WithCosts(costs.Engines()...), planner.WithSource(src), planner.WithDevice("cpu"))
	tr, err := run.LoadTrained(p, progtest.Decoded(t, prog), filepath.Join(dir, "ckpt", folder.LastCheckpoint), native.Backend{}, n, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.Normalize(x, n)
	want := make([]float32, n*10)
	if err := tr.Predict(x, n, want); err != nil {
		t.Fatal(err)
	}
	outs, _ := ort.Run(t, out, onnxtest.Batch{X: x, N: n, Shape: []int64{1, 28, 28}})
	var worst float64
	for i := range want {
		worst = max(worst, math.Abs(float64(outs[0][i]-want[i])))
	}
	if worst > 1e-4 {
		t.Fatalf("onnxruntime and pipe differ by up to %.3g on the test set's first batch", worst)
	}
	t.Logf("fashion, test set's first %d images: max |onnxruntime − pipe| %.3g", n, worst)
}

// firstImages reads the first n images of a gzip'd IDX file as float32
// pixel values (0 to 255).
func firstImages(t *testing.T, path string, n int) []float32 {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	zr, err := gzip.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16+n*784)
	if _, err := io.ReadFull(zr, buf); err != nil {
		t.Fatal(err)
	}
	if buf[2] != 8 || buf[3] != 3 {
		t.Fatalf("%s is not an IDX file of bytes in 3 dimensions", path)
	}
	x := make([]float32, n*784)
	for i := range x {
		x[i] = float32(buf[16+i])
	}
	return x
}
