package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const servePipe = `pipeline tiny
seed 4
source blobs synthetic { samples 64  shape [1, 4, 4]  classes 3  seed 9 }
model net {
  input [1, 4, 4]
  flatten -> dense 3
}
train { epochs 1  batch 16  optimizer adam lr 0.05  loss cross_entropy }
serve { max_batch 8  max_wait 2ms  latency_target 20ms  timeout 10s }
`

// trainedTiny trains the serve pipeline for two steps with the native
// engine and returns its folder, its file and its checkpoint.
func trainedTiny(t *testing.T) (dir, file, ckpt string) {
	t.Helper()
	fixedHost(t)
	dir, file = tiny(t, servePipe)
	if code, _, stderr := runPipe(t, "", runArgs(dir, "--max-steps", "2", "--threads", "1", file)...); code != exitOK {
		t.Fatalf("training: exit %d\n%s", code, stderr)
	}
	return dir, file, filepath.Join(dir, "ckpt", "last.ckpt")
}

// pipe plan shows the serve block's plan with its reasons, as text and
// JSON.
func TestPlanShowsServing(t *testing.T) {
	fixedHost(t)
	_, file := tiny(t, strings.Replace(servePipe, "max_batch 8", "max_batch auto", 1))
	code, stdout, stderr := runPipe(t, "", "plan", file)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"Serving (fp32): max_batch ", "max_batch auto: the smallest of the latency bound", "max_wait    2.0 ms", "queue auto:", "body limit",
		// An image model: its decodes, and their memory in the plan's.
		"image decodes 160 MiB in that memory: 2 at once of 80.0 MiB each (images of at most 4194304 pixels by their header)",
		"decode limit", "decodes auto: one per core (2)"} {
		// The table's columns widen with its longest name: compare words.
		if !strings.Contains(strings.Join(strings.Fields(stdout), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("pipe plan does not say %q:\n%s", want, stdout)
		}
	}
	code, stdout, _ = runPipe(t, "", "plan", "--json", file)
	var p struct {
		Serve *struct {
			MaxBatch       int64   `json:"max_batch"`
			MaxWaitSeconds float64 `json:"max_wait_seconds"`
			Decisions      []struct{ What, Reason string }
		} `json:"serve"`
	}
	if err := json.Unmarshal([]byte(stdout), &p); err != nil || code != exitOK || p.Serve == nil {
		t.Fatalf("plan --json: exit %d, %v, serve %v", code, err, p.Serve)
	}
	if p.Serve.MaxBatch < 1 || p.Serve.MaxWaitSeconds != 0.002 || len(p.Serve.Decisions) < 5 {
		t.Errorf("serving plan %+v", *p.Serve)
	}
	// Without a serve block, only --serve asks for it.
	_, plain := tiny(t, tinyPipe)
	if _, stdout, _ := runPipe(t, "", "plan", plain); strings.Contains(stdout, "Serving (") {
		t.Errorf("a file without a serve block shows serving:\n%s", stdout)
	}
	if _, stdout, _ := runPipe(t, "", "plan", "--serve", plain); !strings.Contains(stdout, "max_batch auto: the smallest") {
		t.Errorf("plan --serve shows no serving plan:\n%s", stdout)
	}
}

// A checkpoint of another model is refused at start-up with exit 1 and
// the reason.
func TestServeRefusesAnotherModelsCheckpoint(t *testing.T) {
	_, _, ckpt := trainedTiny(t)
	_, otherFile := tiny(t, strings.Replace(servePipe, "dense 3", "dense 5 -> relu -> dense 3", 1))
	code, _, stderr := runPipe(t, "", "serve", "--checkpoint", ckpt, "--addr", "127.0.0.1:0", otherFile)
	if code != exitErrors || !strings.Contains(stderr, "refusing to serve") || !strings.Contains(stderr, "the checkpoint does not fit") {
		t.Fatalf("exit %d, want 1 with the reason:\n%s", code, stderr)
	}
}

// pipe serve answers a prediction and, when its context ends (SIGTERM),
// drains and exits 0.
func TestServeAnswersAndDrains(t *testing.T) {
	_, file, ckpt := trainedTiny(t)
	outs, stderr := serveOne(t, file, ckpt, make([]float32, 16))
	if len(outs) != 3 || !strings.Contains(stderr, "drained") {
		t.Fatalf("outputs %v:\n%s", outs, stderr)
	}
}

// --checkpoint takes the run's checkpoint folder, as run --resume does:
// serve and export load the checkpoint in it.
func TestCheckpointFolder(t *testing.T) {
	dir, file, ckpt := trainedTiny(t)
	folder := filepath.Dir(ckpt)
	outs, stderr := serveOne(t, file, folder, make([]float32, 16))
	if len(outs) != 3 || !strings.Contains(stderr, ckpt) {
		t.Fatalf("serve --checkpoint %s: outputs %v, want 3 from %s:\n%s", folder, outs, ckpt, stderr)
	}
	out := filepath.Join(dir, "m.onnx")
	if code, _, stderr := runPipe(t, "", "export", "--checkpoint", folder, "--onnx", out, file); code != exitOK {
		t.Fatalf("export --checkpoint %s: exit %d\n%s", folder, code, stderr)
	}
	if _, err := os.Stat(out); err != nil {
		t.Error(err)
	}
}

// With precision int8 the workers' models are quantised, calibrated on the
// training batches, and answer within int8's error of the fp32 model.
func TestServeInt8(t *testing.T) {
	dir, file, ckpt := trainedTiny(t)
	x := make([]float32, 16)
	for i := range x {
		x[i] = float32(i%5) - 2
	}
	fp32, _ := serveOne(t, file, ckpt, x)
	int8File := filepath.Join(dir, "int8.pipe")
	if err := os.WriteFile(int8File, []byte(strings.Replace(servePipe, "timeout 10s", "timeout 10s  precision int8  calibrate 2", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	q, stderr := serveOne(t, int8File, ckpt, x)
	if !strings.Contains(stderr, "int8: 1 layers quantised per channel, calibrated on 2 batches") {
		t.Fatalf("pipe serve did not say it quantised:\n%s", stderr)
	}
	var big, diff float64
	for i := range fp32 {
		big = max(big, math.Abs(float64(fp32[i])))
		diff = max(diff, math.Abs(float64(fp32[i]-q[i])))
	}
	if diff == 0 || diff > 0.05*big {
		t.Errorf("int8 outputs %v against fp32 %v: largest difference %g, want in (0, 5%% of %g]", q, fp32, diff, big)
	}
}

// serveOne starts pipe serve on file (with --checkpoint ckpt unless ""), posts one sample, then ends it as
// SIGTERM does and checks it exited 0; it returns the sample's outputs
// and what pipe serve wrote to standard error.
func serveOne(t *testing.T, file, ckpt string, x []float32) ([]float32, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	oldCtx, oldListen := serveContext, serveListening
	serveContext = func() (context.Context, func()) { return ctx, cancel }
	serveListening = func(a net.Addr) { addrc <- a }
	t.Cleanup(func() { serveContext, serveListening = oldCtx, oldListen })
	var code int
	var stderr string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		args := []string{"serve", "--addr", "127.0.0.1:0", "--drain-grace", "10ms", file}
		if ckpt != "" {
			args = append([]string{"serve", "--checkpoint", ckpt}, args[1:]...)
		}
		code, _, stderr = runPipe(t, "", args...)
	}()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case <-time.After(60 * time.Second):
		cancel()
		wg.Wait()
		t.Fatalf("pipe serve did not start:\n%s", stderr)
	}
	body, _ := json.Marshal(map[string]any{"inputs": [][]float32{x}})
	resp, err := http.Post("http://"+addr.String()+"/v1/predict", "application/json", bytes.NewReader(body))
	if err != nil {
		cancel()
		wg.Wait()
		t.Fatal(err)
	}
	var res struct {
		Outputs     [][]float32
		Predictions []struct{ Class int }
	}
	err = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	cancel()
	wg.Wait()
	if err != nil || resp.StatusCode != 200 || len(res.Outputs) != 1 || len(res.Predictions) != 1 {
		t.Fatalf("predict: %d %v %+v\n%s", resp.StatusCode, err, res, stderr)
	}
	if code != exitOK {
		t.Fatalf("exit %d after draining, want 0:\n%s", code, stderr)
	}
	return res.Outputs[0], stderr
}
