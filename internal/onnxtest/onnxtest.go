// Package onnxtest runs ONNX models through a real runtime for the tests:
// onnxruntime-node, pinned in bench/onnx/package.json and installed into
// bench/onnx/node_modules by make (npm ci), driven by bench/onnx/run.js.
package onnxtest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Runtime is node and the runner script, once node runs and
// onnxruntime-node is installed. Where either is missing the test is
// skipped, or fails when PIPE_REQUIRE_ONNX is set (make test sets it,
// and installs both).
func Runtime(t testing.TB) *ORT {
	t.Helper()
	fail := func(format string, args ...any) *ORT {
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("PIPE_REQUIRE_ONNX") != "" {
			t.Fatalf("%s, and PIPE_REQUIRE_ONNX is set (make test installs node, npm and bench/onnx/node_modules)", msg)
		}
		t.Skip(msg + " (make deps installs it)")
		return nil
	}
	root, err := repoRoot()
	if err != nil {
		return fail("no repository root: %v", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return fail("node is not installed")
	}
	dir := filepath.Join(root, "bench", "onnx")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "onnxruntime-node", "package.json")); err != nil {
		return fail("onnxruntime-node is not installed in bench/onnx/node_modules (cd bench/onnx && npm ci)")
	}
	return &ORT{Node: node, Script: filepath.Join(dir, "run.js")}
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = up
	}
}

// ORT runs models through onnxruntime-node.
type ORT struct{ Node, Script string }

// Batch is one input to run: X holds N samples of Shape, float32.
type Batch struct {
	X     []float32
	N     int
	Shape []int64
}

// Run runs the model file on each batch in one session and returns each
// output and its dims as the runtime reported them.
func (o *ORT) Run(t testing.TB, model string, batches ...Batch) (outs [][]float32, dims [][]int64) {
	t.Helper()
	dir := t.TempDir()
	args := []string{o.Script, model}
	for i, b := range batches {
		in, out := filepath.Join(dir, fmt.Sprintf("in%d.f32", i)), filepath.Join(dir, fmt.Sprintf("out%d.f32", i))
		buf := make([]byte, 4*len(b.X))
		for j, v := range b.X {
			binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(v))
		}
		if err := os.WriteFile(in, buf, 0o644); err != nil {
			t.Fatal(err)
		}
		d := []string{fmt.Sprint(b.N)}
		for _, s := range b.Shape {
			d = append(d, fmt.Sprint(s))
		}
		args = append(args, in, strings.Join(d, ","), out)
	}
	cmd := exec.Command(o.Node, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("onnxruntime refused %s: %v\n%s", filepath.Base(model), err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	if len(lines) != len(batches) {
		t.Fatalf("onnxruntime answered %d lines for %d batches:\n%s", len(lines), len(batches), stdout)
	}
	for i := range batches {
		var r struct{ Dims []int64 }
		if err := json.Unmarshal([]byte(lines[i]), &r); err != nil {
			t.Fatalf("onnxruntime's line %q: %v", lines[i], err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("out%d.f32", i)))
		if err != nil {
			t.Fatal(err)
		}
		y := make([]float32, len(raw)/4)
		for j := range y {
			y[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
		}
		outs, dims = append(outs, y), append(dims, r.Dims)
	}
	return outs, dims
}

// Tolerance is the bound on |onnxruntime − pipe| over outputs want: 1e-4,
// relative to the largest output where that exceeds 1, since float32's
// rounding grows with the values summed (a regression restored to its
// units, or logits of tens, carry errors of their magnitude times 1e-7
// per operation whoever computes them).
func Tolerance(want []float32) float64 {
	return 1e-4 * max(1, Largest(want))
}

// Largest is the largest |v|.
func Largest(v []float32) float64 {
	var m float64
	for _, x := range v {
		m = max(m, math.Abs(float64(x)))
	}
	return m
}

// MaxDiff is the largest |a[i] − b[i]|; NaN where either holds a NaN, so
// that a comparison against a tolerance fails.
func MaxDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		e := math.Abs(float64(a[i]) - float64(b[i]))
		if math.IsNaN(e) {
			return e
		}
		d = max(d, e)
	}
	return d
}
