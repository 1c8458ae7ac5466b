package stdlib

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"pipe/lang"
	"pipe/spec"
)

// tags lists the arguments the pipe tags of struct type t read, as
// "field" (the field's main argument) or "field.arg"; a struct-pointer
// field's own tags are arguments of its field.
func tags(t reflect.Type, in string, out map[string]bool) {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, ok := sf.Tag.Lookup("pipe")
		if !ok {
			continue
		}
		switch {
		case in != "":
			out[in+"."+tag] = true
		case sf.Type.Kind() == reflect.Pointer && sf.Type.Elem().Kind() == reflect.Struct:
			tags(sf.Type.Elem(), tag, out)
		default:
			out[tag] = true
		}
	}
}

// TestSourceSpecsCoverSchema: every argument of every source kind's
// fields in the schema has a field of its spec to be decoded into, so a
// field added to the schema cannot be left unread.
func TestSourceSpecsCoverSchema(t *testing.T) {
	for kind, fields := range sourceVariants() {
		s := spec.NewSource("s", kind)
		if s == nil {
			t.Errorf("source kind %s has no spec", kind)
			continue
		}
		have := map[string]bool{}
		tags(reflect.TypeOf(*s), "", have)
		tags(reflect.TypeOf(s.KindSpec()).Elem(), "", have)
		for _, f := range fields {
			for i, a := range f.Args {
				key := f.Name + "." + a.Name
				if i == 0 && !have[key] {
					key = f.Name
				}
				if !have[key] {
					t.Errorf("source kind %s: %s is in the schema and in no spec field", kind, key)
				}
			}
		}
	}
}

// TestDecodeSource decodes a source of each shape of value and keeps the
// ranges of its fields.
func TestDecodeSource(t *testing.T) {
	src := `source s geotiff {
  path "a.tif"
  bands [1, 3]
  tile 64x32 stride 16
  split 0.8 seed 4 blocks 128
  nodata -1.5
  augment [flip_h, rot90]
}
`
	f, ds := lang.Parse("t.pipe", []byte(src))
	p, cds := lang.Check(f, Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		t.Fatal(ds)
	}
	s, ds := DecodeSource(p.Block("source"))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	g := s.GeoTIFF
	switch {
	case s.Name != "s" || s.Kind != spec.KindGeoTIFF || g == nil:
		t.Fatalf("decoded %+v", s)
	case g.Path != "a.tif" || !reflect.DeepEqual(g.Bands, []int{1, 3}) || !reflect.DeepEqual(g.Tile, []int64{64, 32}):
		t.Errorf("path %q, bands %v, tile %v", g.Path, g.Bands, g.Tile)
	case g.Stride == nil || *g.Stride != 16 || g.Nodata == nil || *g.Nodata != -1.5 || g.Downsample != nil:
		t.Errorf("stride %v, nodata %v, downsample %v", g.Stride, g.Nodata, g.Downsample)
	case s.Split == nil || s.Split.Fraction != 0.8 || *s.Split.Seed != 4 || *s.Split.Blocks != 128:
		t.Errorf("split %+v", s.Split)
	case strings.Join(s.Augment, ",") != "flip_h,rot90":
		t.Errorf("augment %v", s.Augment)
	}
	if r := s.At.Field("tile"); r == nil || r.Start.Line != 4 || s.At.Has("target") || s.At.NameRange == nil {
		t.Errorf("ranges: tile at %v, %+v", r, s.At)
	}
}

// TestDecodeExamples decodes every example without a diagnostic; the
// decoded program finds the train source and the models the checked one
// finds, and comes back from JSON unchanged.
func TestDecodeExamples(t *testing.T) {
	paths, _ := filepath.Glob("../examples/*.pipe")
	if len(paths) == 0 {
		t.Fatal("no examples")
	}
	for _, path := range paths {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, ds := lang.Parse(path, src)
		prog, cds := lang.Check(f, Schema())
		if ds = append(ds, cds...); ds.HasErrors() {
			t.Fatalf("%s: %v", path, ds)
		}
		dec, ds := Decode(prog)
		if len(ds) > 0 {
			t.Errorf("%s: %v", path, ds)
			continue
		}
		want, got := prog.TrainSource(), dec.Spec.TrainSource()
		if (want == nil) != (got == nil) || want != nil && want.Name() != got.Name {
			t.Errorf("%s: train source %v, decoded %v", path, want, got)
		}
		if len(dec.Spec.Sources) != len(prog.BlocksOf("source")) || len(dec.Spec.Models) != len(prog.Models) {
			t.Errorf("%s: %d sources and %d models decoded", path, len(dec.Spec.Sources), len(dec.Spec.Models))
		}
		raw, err := json.Marshal(dec.Spec)
		var back spec.Program
		if err == nil {
			err = json.Unmarshal(raw, &back)
		}
		if err != nil || !reflect.DeepEqual(&back, dec.Spec) {
			t.Errorf("%s: the spec does not survive JSON (%v):\n%s", path, err, raw)
		}
		for _, m := range prog.Models {
			if g, ds := dec.Graph(m.Name); g == nil && !ds.HasErrors() {
				t.Errorf("%s: model %s has no graph", path, m.Name)
			}
		}
	}
}

// TestDecodePlannerSettings decodes what the planner reads: the
// top-level fields, a device block, train's auto settings, gan mode, a
// serve block and the calls of each model.
func TestDecodePlannerSettings(t *testing.T) {
	src := `device lab {
  kind cpu
  memory 8GiB
  bandwidth 50GB/s
  fp32 1TFLOPS
  cores 4
}
device lab
precision auto
source s synthetic {
  shape [3, 8, 8]
  samples 16
}
model g {
  input [3, 8, 8]
  conv 3 k3 pad1
}
model d {
  input [3, 8, 8]
  conv 1 k3
}
train {
  epochs 4
  mode gan
  generator g
  discriminator d
  l1 100
  batch auto(max 32)
  workers 2
  fuse false
  optimizer sgd lr 0.5 momentum 0.9
  schedule step warmup 1
}
serve {
  max_batch 8
  queue auto
  timeout 2s
}
`
	f, ds := lang.Parse("t.pipe", []byte(src))
	p, cds := lang.Check(f, Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		t.Fatal(ds)
	}
	dec, ds := Decode(p)
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	sp := dec.Spec
	if sp.File != "t.pipe" || sp.Device == nil || sp.Device.Value != "lab" || sp.Device.Range.Start.Line != 8 || sp.Precision == nil || !sp.Precision.IsAuto || sp.Engine != nil {
		t.Errorf("top: file %q, device %+v, precision %+v, engine %+v", sp.File, sp.Device, sp.Precision, sp.Engine)
	}
	if r := sp.At.Written("precision"); r == nil || r.Start.Line != 9 {
		t.Errorf("precision written at %v", r)
	}
	if len(sp.Devices) != 1 || sp.Devices[0].Name != "lab" || sp.Devices[0].Kind != "cpu" || sp.Devices[0].Memory != 8<<30 || sp.Devices[0].Cores != 4 || sp.Devices[0].At.Has("host_memory") {
		t.Errorf("devices %+v", sp.Devices)
	}
	tr := sp.Train
	if b := tr.Batch; b == nil || !b.IsAuto || b.Min != nil || b.Max == nil || *b.Max != 32 {
		t.Errorf("batch %+v", tr.Batch)
	}
	if n, ok := tr.Workers.Fixed(); !ok || n != 2 || tr.Prefetch != nil {
		t.Errorf("workers %+v, prefetch %+v", tr.Workers, tr.Prefetch)
	}
	if v, ok := tr.Fuse.Fixed(); !ok || v || *tr.Optimizer.LR != 0.5 || *tr.Schedule.Warmup != 1 || tr.Mode != "gan" {
		t.Errorf("fuse %+v, optimizer %+v, schedule %+v, mode %q", tr.Fuse, tr.Optimizer, tr.Schedule, tr.Mode)
	}
	if g := sp.GAN; g == nil || g.Generator != "g" || g.Discriminator != "d" || g.L1 != 100 || g.Adversarial != "bce" || g.AdvWeight != 1 || g.DSteps != 1 {
		t.Errorf("gan %+v", sp.GAN)
	}
	s := sp.Serve
	if n, ok := s.MaxBatch.Fixed(); s == nil || !ok || n != 8 || !s.Queue.IsAuto || *s.Timeout != 2 || s.Workers != nil {
		t.Errorf("serve %+v", s)
	}
	if m := sp.Model("d"); m == nil || len(m.Calls) != 1 || m.Calls[0].Name != "conv" || m.Calls[0].NameRange.Start.Line != 20 {
		t.Errorf("model d %+v", m)
	}
}
