package tensorboard

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/proto"

	"pipe/planner/plan"
	"pipe/run"
	"pipe/run/tensorboard/tbpb"
	"pipe/run/tensorboard/tbpb/hparamspb"
)

// Overrides are hyper-parameters under their paths, typed as the HParams
// table compares them; the plan's choices come under plan.*.
func TestHParams(t *testing.T) {
	p := &plan.Plan{Overrides: []string{"train.lr=3e-4", "model.mlp.dense[0].units=64", "train.save=\"all\"",
		"train.schedule=cosine", "x=true"}, BatchSize: 32, AccumulationSteps: 2, EffectiveBatch: 64}
	p.Optimizer.LR = 6e-4
	hp := HParams(p)
	for k, want := range map[string]any{"train.lr": 3e-4, "model.mlp.dense[0].units": 64.0, "train.save": "all",
		"train.schedule": "cosine", "x": true, "plan.batch_size": 32.0, "plan.accumulation_steps": 2.0,
		"plan.effective_batch": 64.0, "plan.lr": 6e-4} {
		if v, ok := hp[k]; !ok || v.AsInterface() != want {
			t.Errorf("%s: %v, want %v", k, v.AsInterface(), want)
		}
	}
	e := experiment(hp, []string{"accuracy"}, []string{"iou"}, true, time.Unix(0, 0))
	types := map[string]hparamspb.DataType{}
	for _, h := range e.HparamInfos {
		types[h.Name] = h.Type
	}
	if types["train.lr"] != hparamspb.DataType_DATA_TYPE_FLOAT64 || types["x"] != hparamspb.DataType_DATA_TYPE_BOOL ||
		types["train.save"] != hparamspb.DataType_DATA_TYPE_STRING {
		t.Errorf("types %v", types)
	}
	var tags []string
	for _, m := range e.MetricInfos {
		tags = append(tags, m.Name.Tag)
	}
	if got := strings.Join(tags, " "); got != "final/loss final/iou epoch/val_loss epoch/accuracy epoch/train_loss step/loss" {
		t.Errorf("metrics %s", got)
	}
}

// A folder that cannot be written costs the run its events, with one
// warning, and nothing else.
func TestLoggerFailsQuietly(t *testing.T) {
	var logs bytes.Buffer
	l := New(Config{Dir: filepath.Join(t.TempDir(), "missing"), Log: hclog.New(&hclog.LoggerOptions{Output: &logs})})
	h := l.Hooks()
	h.Start(run.StartInfo{})
	h.Step(run.StepInfo{Step: 1, Loss: 1})
	h.Epoch(run.EpochResult{Epoch: 1, Step: 1})
	l.Finish(&run.Result{Precision: "fp32", Status: run.StatusCompleted})
	if n := strings.Count(logs.String(), "TensorBoard events not written"); n != 1 {
		t.Errorf("%d warnings:\n%s", n, logs.String())
	}
}

// A run's events in order: the file version, the HParams experiment and
// session start at the first step, the steps, the epoch (synced), the end.
func TestLoggerWritesARun(t *testing.T) {
	dir := t.TempDir()
	clock := time.Unix(1700000000, 0)
	l := New(Config{Dir: dir, Plan: &plan.Plan{BatchSize: 8}, Metrics: []string{"accuracy"},
		Now: func() time.Time { clock = clock.Add(time.Second); return clock }})
	h := l.Hooks()
	h.Start(run.StartInfo{ValSamples: 10})
	for s := int64(1); s <= 3; s++ {
		h.Step(run.StepInfo{Step: s, Loss: float64(s), LR: 0.1, Samples: 8 * s})
	}
	h.Epoch(run.EpochResult{Epoch: 1, Step: 3, TrainLoss: 2, Seconds: 2, LR: 0.1,
		Val: &run.Evaluation{Loss: 1.5}})
	l.Finish(&run.Result{Precision: "fp32", Status: run.StatusCompleted, Position: run.Position{Step: 3},
		Final: &run.Evaluation{Loss: 1.25}})
	files, _ := filepath.Glob(filepath.Join(dir, FilePrefix+"*"))
	if len(files) != 1 || !strings.HasSuffix(files[0], ".pipe") {
		t.Fatalf("files %v", files)
	}
	b, _ := os.ReadFile(files[0])
	recs, err := ReadRecords(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var seq []string
	for _, r := range recs {
		var ev tbpb.Event
		if err := proto.Unmarshal(r, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.GetFileVersion() != "" {
			seq = append(seq, ev.GetFileVersion())
		}
		for _, v := range ev.GetSummary().GetValue() {
			seq = append(seq, fmt.Sprintf("%s@%d", v.Tag, ev.Step))
		}
	}
	want := "brain.Event:2 _hparams_/experiment@0 _hparams_/session_start_info@0 " +
		"step/loss@1 step/lr@1 step/samples_per_second@1 step/loss@2 step/lr@2 step/samples_per_second@2 " +
		"step/loss@3 step/lr@3 step/samples_per_second@3 " +
		"epoch/train_loss@3 epoch/val_loss@3 epoch/lr@3 epoch/seconds@3 epoch/loader_stall_seconds@3 epoch/samples_per_second@3 " +
		"final/loss@3 _hparams_/session_end_info@3"
	if got := strings.Join(seq, " "); got != want {
		t.Errorf("events\n%s\nwant\n%s", got, want)
	}
}
