package run

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"pipe/run/folder"
)

// oldRun is a run folder that pipe wrote at e96e19f, before the folder
// was package folder (testdata/e96e19f/README.md says how it was made).
const oldRun = "testdata/e96e19f/out/tiny"

// TestReadsTheCheckpointsOfE96e19f: today's pipe reads a checkpoint that
// pipe wrote before the run folder was its own package, every field as
// it was written, and writes the same state in the same format: the
// same header, metadata length and tensor bytes, and metadata that
// decodes to the same values (gob writes the counters' map in Go's map
// order, so those bytes may be permuted, and the checksum over them).
func TestReadsTheCheckpointsOfE96e19f(t *testing.T) {
	dir, legacy, err := folder.LatestRun(oldRun)
	if err != nil || legacy || filepath.Base(dir) != "job1" {
		t.Fatalf("latest: %s (legacy %v), %v", dir, legacy, err)
	}
	if job, err := folder.ReadJob(dir); job != "job1" || err != nil {
		t.Errorf("job record %q, %v", job, err)
	}
	if s, err := folder.ReadSettings(dir); err != nil || s == nil ||
		!s.Equal(&folder.Settings{Overrides: []string{"train.lr=0.04"}, Flags: map[string]string{"threads": "1"}}) {
		t.Errorf("settings %+v, %v", s, err)
	}
	path := filepath.Join(dir, folder.LastCheckpoint)
	meta, st, err := readCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Pipeline != "tiny" || meta.Model != "net" || meta.Backend != "native" || meta.OptimizerKind != "adam" ||
		meta.LossKind != "cross_entropy" || meta.Structure == "" || !slices.Equal(meta.Overrides, []string{"train.lr=0.04"}) {
		t.Errorf("identity %+v", meta)
	}
	if p := meta.Position; p.Epoch != 1 || p.Step != 4 || p.MicroStep != 4 || p.Batch != 0 || meta.StepLimit != 4 ||
		len(meta.StepLosses) != 4 || len(meta.EpochResults) != 1 || !meta.HasBest || meta.Reason != "epoch" {
		t.Errorf("position %+v, limit %d, %d losses, %d epochs, best %v, reason %q",
			p, meta.StepLimit, len(meta.StepLosses), len(meta.EpochResults), meta.HasBest, meta.Reason)
	}
	if meta.BatchSize != 16 || meta.Seed != 4 || meta.Epochs != 2 || meta.InputSource != "synthetic" || meta.TargetNormalize != "none" {
		t.Errorf("settings in the metadata %+v", meta)
	}
	var names []string
	for i, x := range st.Tensors {
		names = append(names, x.Name)
		n := int64(1)
		for _, d := range x.Shape {
			n *= d
		}
		if int(n) != len(x.Data) || meta.Tensors[i].Len != len(x.Data) {
			t.Errorf("%s: shape %v, %d values", x.Name, x.Shape, len(x.Data))
		}
	}
	want := []string{"dense1.weight", "dense1.bias", "optimizer.dense1.weight.exp_avg", "optimizer.dense1.weight.exp_avg_sq",
		"optimizer.dense1.bias.exp_avg", "optimizer.dense1.bias.exp_avg_sq"}
	if !slices.Equal(names, want) || st.Counters["optimizer.step"] != 4 || st.Counters["exec.micro_step"] != 4 {
		t.Errorf("tensors %v, counters %v", names, st.Counters)
	}
	if m, err := readCheckpointMeta(filepath.Join(dir, folder.BestCheckpoint)); err != nil || m.Position.Step != 4 {
		t.Errorf("best.ckpt's metadata: %+v, %v", m, err)
	}

	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	again := *meta
	again.Tensors = nil // encodeCheckpoint refills them
	var b bytes.Buffer
	if err := encodeCheckpoint(&b, &again, st); err != nil {
		t.Fatal(err)
	}
	now := b.Bytes()
	const header, checksum = 64, 32 // folder's layout: docs/design/checkpoint-files.md
	if len(now) != len(old) || !bytes.Equal(now[:checksum], old[:checksum]) {
		t.Fatalf("today's file of the same state: %d bytes, header %x; the old one %d, %x", len(now), now[:checksum], len(old), old[:checksum])
	}
	mlen := int(binary.LittleEndian.Uint64(old[16:24]))
	if !bytes.Equal(now[header+mlen:], old[header+mlen:]) {
		t.Errorf("the tensor bytes differ")
	}
	tmp := filepath.Join(t.TempDir(), "now.ckpt")
	if err := os.WriteFile(tmp, now, 0o644); err != nil {
		t.Fatal(err)
	}
	back, st2, err := readCheckpoint(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, meta) || !reflect.DeepEqual(st2, st) {
		t.Errorf("today's file reads back otherwise:\n%+v\n%+v", back, meta)
	}
}
