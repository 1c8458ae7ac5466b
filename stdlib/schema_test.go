package stdlib

import (
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"

	"pipe/lang"
)

// TestRegistryDocs: every block, field, argument, label and layer says what
// it is, names are unique where they meet, positional arguments come first,
// enums have values and bounds are ordered.
func TestRegistryDocs(t *testing.T) {
	r := Schema()
	checkArgs := func(owner string, args []*lang.ArgSpec) {
		seen := map[string]bool{}
		named := false
		for _, a := range args {
			where := owner + " " + a.Name
			if a.Doc == "" {
				t.Errorf("%s has no doc", where)
			}
			for _, n := range append([]string{a.Name}, a.Aliases...) {
				if seen[n] {
					t.Errorf("%s: name %s used twice", owner, n)
				}
				seen[n] = true
			}
			if a.Positional && named {
				t.Errorf("%s: positional after a named argument", where)
			}
			named = named || !a.Positional
			if (a.Type == lang.TEnum || a.Type == lang.TList && a.Elem == lang.TEnum) && len(a.Enum) == 0 && a.EnumFrom == nil {
				t.Errorf("%s: an enum without values", where)
			}
			if a.Type == lang.TList && a.Elem == 0 {
				t.Errorf("%s: a list without an element type", where)
			}
			if a.Min != nil && a.Max != nil && *a.Min > *a.Max {
				t.Errorf("%s: min %v > max %v", where, *a.Min, *a.Max)
			}
			if a.Glued && a.Type != lang.TInt {
				t.Errorf("%s: only integers can be glued", where)
			}
		}
	}
	checkFields := func(owner string, fs []*lang.FieldSpec) {
		seen := map[string]bool{}
		for _, f := range fs {
			if f.Doc == "" {
				t.Errorf("%s %s has no doc", owner, f.Name)
			}
			if seen[f.Name] {
				t.Errorf("%s: field %s twice", owner, f.Name)
			}
			seen[f.Name] = true
			if len(f.Args) == 0 {
				t.Errorf("%s %s takes no argument", owner, f.Name)
			}
			checkArgs(owner+" "+f.Name, f.Args)
		}
	}
	checkFields("file", r.TopFields())
	for _, b := range r.Blocks() {
		if b.Doc == "" {
			t.Errorf("block %s has no doc", b.Name)
		}
		for _, l := range b.Labels {
			if l.Doc == "" {
				t.Errorf("block %s label %s has no doc", b.Name, l.Name)
			}
		}
		checkFields(b.Name, b.Fields)
		for v, fs := range b.Variants {
			checkFields(b.Name+" "+v, append(append([]*lang.FieldSpec(nil), b.Fields...), fs...))
		}
		if r.Block(b.Name) != b {
			t.Errorf("Block(%q) does not find it", b.Name)
		}
	}
	src := r.Block("source")
	for _, kind := range src.Labels[1].Enum {
		if len(src.Variants[kind]) == 0 {
			t.Errorf("source kind %s has no fields", kind)
		}
	}
	for _, l := range r.Layers() {
		if l.Doc == "" {
			t.Errorf("layer %s has no doc", l.Name)
		}
		checkArgs("layer "+l.Name, l.Args)
		if r.Layer(l.Name) != l {
			t.Errorf("Layer(%q) does not find it", l.Name)
		}
	}
	names := r.LayerNames()
	if !sort.StringsAreSorted(names) || r.Layer("global_avg_pool") != r.Layer("gap") {
		t.Errorf("layer names %v", names)
	}
}

// TestEveryLayerBuilds: each registered layer and family builds a graph on
// a suitable input with its required arguments, so none lacks a rule.
func TestEveryLayerBuilds(t *testing.T) {
	required := map[string]lang.Args{
		"dense": {"units": iv(4)}, "lowrank_dense": {"units": iv(4)}, "sketched_dense": {"units": iv(4)}, "conv": {"out": iv(4)}, "sketched_conv": {"out": iv(4)},
		"convtranspose": {"out": iv(4)}, "conv3d": {"out": iv(4)}, "convtranspose3d": {"out": iv(4)}, "mlp": {"hidden": lv(8), "out": iv(2)}, "cnn": {"channels": lv(8), "out": iv(2)},
		"pixelshuffle": {"factor": iv(1)},
		"concat":       {"tensor": {Tensor: &lang.Chain{From: "input"}}}, "add": {"tensor": {Tensor: &lang.Chain{From: "input"}}},
		"patches": {"size": iv(4), "dim": iv(8)}, "random_attention": {"features": iv(6)}, "groupnorm": {"groups": iv(3)},
	}
	tokens := map[string]bool{"class_token": true, "pos_embed": true, "attention": true, "select_token": true, "mean_tokens": true, "random_attention": true}
	vector := map[string]bool{"dense": true, "lowrank_dense": true, "sketched_dense": true, "mlp": true}
	for _, l := range Schema().Layers() {
		input := []int64{3, 32, 32}
		if vector[l.Name] {
			input = []int64{16}
		}
		if tokens[l.Name] {
			input = []int64{16, 8}
		}
		if l.Name == "vit" || l.Name == "deeplabv3plus" {
			input = []int64{3, 64, 64}
		}
		if strings.HasSuffix(l.Name, "3d") {
			input = []int64{2, 8, 16, 16}
		}
		args := required[l.Name]
		if args == nil {
			args = lang.Args{}
		}
		g, ds := BuildGraph(oneCall(input, l.Name, args))
		if len(ds) > 0 || len(g.Nodes) < 2 {
			t.Errorf("%s: %d nodes, %v", l.Name, len(g.Nodes), ds)
		}
	}
	known := map[string]bool{}
	for _, op := range Ops() {
		known[op.Name] = true
		if op.Doc == "" || op.Shape == "" || op.Saved == "" {
			t.Errorf("op %s is not documented", op.Name)
		}
	}
	for _, name := range []string{"resnet50", "vit", "deeplabv3plus", "unet", "mlp", "cnn"} {
		g, _ := BuildGraph(oneCall([]int64{3, 64, 64}, name, lang.Args{"hidden": lv(8), "channels": lv(8), "out": iv(2), "depth": iv(2)}))
		for _, n := range g.Nodes {
			if !known[n.Op] {
				t.Errorf("%s: op %s is missing from Ops", name, n.Op)
			}
		}
	}
}

func TestDevices(t *testing.T) {
	names := Schema().DeviceNames()
	if names[0] != "auto" || names[1] != "cpu" || len(names) != len(Devices())+2 {
		t.Errorf("device names %v", names)
	}
	for _, d := range Devices() {
		if Device(d.Name) != d || d.Kind != "gpu" || d.Doc == "" {
			t.Errorf("%s: lookup or kind wrong", d.Name)
		}
		if d.Memory <= 0 || d.Bandwidth <= 0 || d.FP32 <= 0 || d.FP16 <= d.FP32 {
			t.Errorf("%s: memory %d, bandwidth %g, fp32 %g, fp16 %g", d.Name, d.Memory, d.Bandwidth, d.FP32, d.FP16)
		}
		if d.SupportsBF16 != (d.BF16 > 0) || d.SupportsTF32 != (d.TF32 > 0) {
			t.Errorf("%s: support flags disagree with the rates", d.Name)
		}
		if d.Peak("bf16") != d.BF16 || d.Peak("fp8") != 0 {
			t.Errorf("%s: Peak", d.Name)
		}
		// The name carries the marketed capacity: "-80gb" is 80 GiB.
		gb := d.Name[strings.LastIndex(d.Name, "-")+1 : len(d.Name)-2]
		if want := d.Memory >> 30; gb != strconv.FormatInt(want, 10) {
			t.Errorf("%s: memory %d GiB", d.Name, want)
		}
	}
	if h := Device("h100-80gb"); h.BF16 != 989.4e12 || h.Bandwidth != 3.35e12 || h.L2 != 50<<20 {
		t.Errorf("h100: %g bf16, %g B/s, %d bytes of L2", h.BF16, h.Bandwidth, h.L2)
	}
	for _, d := range Devices() {
		if d.Kind == "gpu" && (d.L2 < 4<<20 || d.L2 > 128<<20) {
			t.Errorf("%s: %d bytes of L2", d.Name, d.L2)
		}
	}
	if Device("v100-16gb").SupportsBF16 || Device("cpu") != nil {
		t.Error("v100 has no bf16; cpu is not a built-in profile")
	}
}

// TestImports keeps stdlib's imports to lang, diag, spec (the typed
// specs it decodes blocks into), the standard library and the edit
// distance lang already uses.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, imp := range strings.Fields(string(out)) {
		switch {
		case imp == "pipe/lang", imp == "pipe/diag", imp == "pipe/spec", imp == "github.com/agnivade/levenshtein":
		case strings.Contains(strings.SplitN(imp, "/", 2)[0], "."), strings.HasPrefix(imp, "pipe/"):
			t.Errorf("stdlib imports %s", imp)
		}
	}
}
