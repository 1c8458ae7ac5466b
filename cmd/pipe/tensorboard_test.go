package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"pipe/run/tensorboard"
	"pipe/run/tensorboard/tbpb"
	"pipe/spec"
	"pipe/stdlib"
	"pipe/workflow"
)

// protocPath is Debian's protoc, which the TensorBoard tests decode the
// event files with; without it they are skipped, or fail under
// PIPE_REQUIRE_PROTOC (make test).
func protocPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("protoc")
	if err != nil {
		if os.Getenv("PIPE_REQUIRE_PROTOC") != "" {
			t.Fatalf("protoc not found (apt-get install protobuf-compiler): %v", err)
		}
		t.Skip("protoc not found; apt-get install protobuf-compiler")
	}
	return p
}

// eventFiles are dir's event files, in the order TensorBoard reads them.
func eventFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, tensorboard.FilePrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

// readEvents reads an event file's records, every CRC verified.
func readEvents(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := tensorboard.ReadRecords(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return recs
}

// protocDecode is what protoc --decode TYPE prints for msg, decoded
// against the vendored .proto files.
func protocDecode(t *testing.T, protoc, typ, file string, msg []byte) string {
	t.Helper()
	cmd := exec.Command(protoc, "--decode", typ, "-I", "run/tensorboard/proto", file)
	cmd.Stdin = bytes.NewReader(msg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("protoc --decode %s: %v\n%s", typ, err, stderr.String())
	}
	return string(out)
}

// point is a scalar as protoc printed it.
type point struct {
	step  int64
	value float32
}

// scalars reads protoc's text of one Event: its step, and the tag and
// simple_value of each summary value.
func scalars(t *testing.T, text string, into map[string][]point) {
	t.Helper()
	var step int64
	tag := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		k, v, _ := strings.Cut(strings.TrimSpace(sc.Text()), ": ")
		switch k {
		case "step":
			step, _ = strconv.ParseInt(v, 10, 64)
		case "tag":
			tag, _ = strconv.Unquote(v)
		case "simple_value":
			f, err := strconv.ParseFloat(v, 32)
			if err != nil {
				t.Fatalf("simple_value %q: %v", v, err)
			}
			into[tag] = append(into[tag], point{step, float32(f)})
		}
	}
}

// TestTensorBoardEventsMatchTheReport: a short real run of fashion_mlp
// (one epoch of 28 steps, 4 more, the step limit) writes one event file
// beside its report; every record's CRCs verify, protoc decodes each
// against the vendored .proto files, and each scalar is the report's
// value as float32. The HParams session start holds the --set overrides
// and the plan's batch.
func TestTensorBoardEventsMatchTheReport(t *testing.T) {
	protoc := protocPath(t)
	t.Chdir("../..")
	dir := t.TempDir()
	code, _, stderr := runPipe(t, "", "run", "--device", "cpu", "--engine", "native", "--threads", "2",
		"--set", "train.epochs=2", "--set", "train.batch=2048", "--max-steps", "32",
		"--checkpoint-dir", dir, "--report", filepath.Join(dir, "report.json"), "examples/fashion_mlp.pipe")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var rep struct {
		Steps        int64      `json:"steps"`
		StepLosses   []*float64 `json:"step_losses"`
		FinalLoss    float64    `json:"final_loss"`
		Metrics      map[string]float64
		SamplesPerS  float64 `json:"samples_per_second"`
		Planned      int64   `json:"estimated_peak_bytes"`
		Measured     int64   `json:"measured_peak_bytes"`
		EpochResults []struct {
			Step      int64              `json:"step"`
			TrainLoss float64            `json:"train_loss"`
			ValLoss   float64            `json:"val_loss"`
			Metrics   map[string]float64 `json:"metrics"`
			LR        float64            `json:"lr"`
			Stall     float64            `json:"loader_stall_seconds"`
		} `json:"losses_per_epoch"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Steps != 32 || len(rep.StepLosses) != 32 || len(rep.EpochResults) != 1 {
		t.Fatalf("report: %d steps, %d step losses, %d epochs", rep.Steps, len(rep.StepLosses), len(rep.EpochResults))
	}

	files := eventFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("event files %v, want one", files)
	}
	recs := readEvents(t, files[0])
	got := map[string][]point{}
	var startInfo []byte
	for i, rec := range recs {
		text := protocDecode(t, protoc, "tensorboard.Event", "tensorboard/compat/proto/event.proto", rec)
		if i == 0 && !strings.Contains(text, `file_version: "brain.Event:2"`) {
			t.Errorf("first event:\n%s", text)
		}
		scalars(t, text, got)
		var ev tbpb.Event
		if err := proto.Unmarshal(rec, &ev); err != nil {
			t.Fatal(err)
		}
		for _, v := range ev.GetSummary().GetValue() {
			if v.Tag == tensorboard.SessionStartTag {
				if v.GetMetadata().GetPluginData().GetPluginName() != tensorboard.HParamsPlugin {
					t.Errorf("%s: plugin %q", v.Tag, v.GetMetadata().GetPluginData().GetPluginName())
				}
				startInfo = v.GetMetadata().GetPluginData().GetContent()
			}
		}
	}

	want := func(tag string, step int64, v float64) {
		t.Helper()
		for _, p := range got[tag] {
			if p.step == step {
				if p.value != float32(v) {
					t.Errorf("%s at step %d: %v, the report's %v", tag, step, p.value, float32(v))
				}
				return
			}
		}
		t.Errorf("no %s at step %d (has %v)", tag, step, got[tag])
	}
	if n := len(got["step/loss"]); n != 32 {
		t.Errorf("%d step/loss values, want 32", n)
	}
	for i, l := range rep.StepLosses {
		want("step/loss", int64(i+1), *l)
	}
	e := rep.EpochResults[0]
	want("epoch/train_loss", e.Step, e.TrainLoss)
	want("epoch/val_loss", e.Step, e.ValLoss)
	want("epoch/accuracy", e.Step, e.Metrics["accuracy"])
	want("epoch/lr", e.Step, e.LR)
	want("epoch/loader_stall_seconds", e.Step, e.Stall)
	want("final/loss", 32, rep.FinalLoss)
	want("final/accuracy", 32, rep.Metrics["accuracy"])
	want("final/samples_per_second", 32, rep.SamplesPerS)
	want("memory/planned_bytes", 32, float64(rep.Planned))
	want("memory/measured_bytes", 32, float64(rep.Measured))

	hp := protocDecode(t, protoc, "tensorboard.hparams.HParamsPluginData", "tensorboard/plugins/hparams/plugin_data.proto", startInfo)
	for _, s := range []string{`key: "train.batch"`, `key: "train.epochs"`, `key: "plan.batch_size"`, "number_value: 2048"} {
		if !strings.Contains(hp, s) {
			t.Errorf("session start info has no %s:\n%s", s, hp)
		}
	}

	// A record torn by a crash ends the file where the last whole one
	// ends: the reader keeps every record before it.
	whole, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	torn, err := tensorboard.ReadRecords(bytes.NewReader(whole[:len(whole)-3]))
	if len(torn) != len(recs)-1 || !errors.Is(err, tensorboard.ErrCorrupt) {
		t.Errorf("torn file: %d of %d records, %v", len(torn), len(recs), err)
	}

	// Another TFRecord implementation verifies the same records, and
	// stops at the torn one too.
	tornFile := filepath.Join(t.TempDir(), "torn")
	if err := os.WriteFile(tornFile, whole[:len(whole)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	node, script := tfrecordsChecker(t)
	for _, c := range []struct {
		file    string
		n       int
		stopped string
	}{{files[0], len(recs), ""}, {tornFile, len(recs) - 1, "data cut short"}} {
		out, err := exec.Command(node, script, c.file).Output()
		if err != nil {
			t.Fatalf("node %s: %v", script, err)
		}
		var got struct {
			Records int
			Lengths []int
			Stopped string
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if got.Records != c.n || got.Stopped != c.stopped {
			t.Errorf("%s: the other reader read %d records and stopped at %q; want %d, %q", filepath.Base(c.file), got.Records, got.Stopped, c.n, c.stopped)
			continue
		}
		for i, l := range got.Lengths {
			if l != len(recs[i]) {
				t.Errorf("record %d: %d bytes to the other reader, %d to ours", i, l, len(recs[i]))
			}
		}
	}
}

// tfrecordsChecker is node and bench/tfrecords/check.js, a TFRecord reader
// on @roboflow/tfrecords's CRC-32C; without them the test is skipped, or
// fails under PIPE_REQUIRE_TFRECORDS (make test installs them).
func tfrecordsChecker(t *testing.T) (node, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat("bench/tfrecords/node_modules/@roboflow/tfrecords/package.json")
	}
	if err != nil {
		if os.Getenv("PIPE_REQUIRE_TFRECORDS") != "" {
			t.Fatalf("no TFRecord checker (make test installs node and bench/tfrecords/node_modules): %v", err)
		}
		t.Skipf("no TFRecord checker (cd bench/tfrecords && npm ci): %v", err)
	}
	return node, "bench/tfrecords/check.js"
}

// decodeEvents are an event file's events.
func decodeEvents(t *testing.T, path string) []*tbpb.Event {
	t.Helper()
	var evs []*tbpb.Event
	for _, rec := range readEvents(t, path) {
		ev := &tbpb.Event{}
		if err := proto.Unmarshal(rec, ev); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// TestTensorBoardResumeAppendsAFile: a resumed run writes a second event
// file in the run's folder, after the first in name order, starting with
// a SessionLog START at the resumed step and going on from there; the
// step losses of both files are the report's.
func TestTensorBoardResumeAppendsAFile(t *testing.T) {
	fixedHost(t)
	fakeBackend(t)
	dir, file := tiny(t, tinyPipe)
	if code, _, stderr := runPipe(t, "", runArgs(dir, "--max-steps", "10", file)...); code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runPipe(t, "", runArgs(dir, "--resume", file)...); code != exitOK {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	files := eventFiles(t, filepath.Join(dir, "ckpt"))
	if len(files) != 2 {
		t.Fatalf("event files %v, want two", files)
	}
	losses := map[int64]float32{}
	for i, f := range files {
		evs := decodeEvents(t, f)
		if evs[0].GetFileVersion() != tensorboard.FileVersion {
			t.Errorf("%s: first event %v", f, evs[0])
		}
		if i == 1 && (evs[1].GetSessionLog().GetStatus() != tbpb.SessionLog_START || evs[1].Step != 10) {
			t.Errorf("the resumed file's second event is %v, want a START at step 10", evs[1])
		}
		for _, ev := range evs {
			for _, v := range ev.GetSummary().GetValue() {
				if v.Tag != "step/loss" {
					continue
				}
				if (i == 0) != (ev.Step <= 10) {
					t.Errorf("file %d has step %d", i, ev.Step)
				}
				losses[ev.Step] = v.GetSimpleValue()
			}
		}
	}
	steps := readReport(t, dir)["step_losses"].([]any)
	if len(losses) != 30 || len(steps) != 30 {
		t.Fatalf("%d steps in the events, %d in the report", len(losses), len(steps))
	}
	for i, l := range steps {
		if got, want := losses[int64(i+1)], float32(l.(float64)); got != want {
			t.Errorf("step %d: %v, the report's %v", i+1, got, want)
		}
	}
}

// Rank 0 alone writes TensorBoard events, as it alone writes the report.
func TestTensorBoardRankZeroOnly(t *testing.T) {
	pl := &workflow.Planned{Program: &stdlib.Program{Spec: &spec.Program{}}}
	if tensorBoard(1, t.TempDir(), pl, nil) != nil {
		t.Error("rank 1 has a TensorBoard logger")
	}
	if tensorBoard(0, t.TempDir(), pl, nil) == nil {
		t.Error("rank 0 has no TensorBoard logger")
	}
}
