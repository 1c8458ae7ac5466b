package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/engine/costs"
	"pipe/internal/progtest"
	"pipe/lang"
	"pipe/planner"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// seeds are the configurations of Ununennium's benchmark table (the seed
// guide shared/seeds/000_*) with the peak memory its authors measured on an
// A100 80GB, in decimal GB as they print it. The figures are theirs and
// unverified; pipe does not tune its memory model to them.
var seeds = []struct {
	file      string
	what      string
	published float64 // GB
}{
	{"unet_resnet50.pipe", "U-Net ResNet-50, 512x512x12, batch 16", 12.4},
	{"deeplabv3plus_resnet101.pipe", "DeepLabV3+ ResNet-101, 512x512x12, batch 12", 16.8},
	{"vit_l16.pipe", "ViT-L/16, 224x224x12, batch 32", 18.1},
	// No published figure is recorded here: it plans and is printed.
	{"unet_efficientnet_b4.pipe", "U-Net EfficientNet-B4, 512x512x12, batch 16", 0},
}

// host is a fixed machine, so no figure depends on the one running this.
var host = planner.HostInfo{MemTotal: 512 << 30, MemAvailable: 500 << 30, Cores: 64}

func planFile(t testing.TB, path string, opts ...planner.Option) *plan.Plan {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return planSource(t, path, src, opts...)
}

func planSource(t testing.TB, name string, src []byte, opts ...planner.Option) *plan.Plan {
	t.Helper()
	f, ds := lang.Parse(name, src)
	prog, cds := lang.Check(f, stdlib.Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		t.Fatalf("%s:\n%v", name, ds)
	}
	p, pds := planner.Plan(progtest.Decoded(t, prog), append([]planner.Option{planner.WithCosts(costs.Engines()...), planner.WithHost(host), planner.WithSource(src)}, opts...)...)
	if pds.HasErrors() {
		t.Fatalf("%s:\n%v", name, pds)
	}
	return p
}

// TestSeedFigures prints the plan's estimate beside the published peak of
// each seed configuration. It asserts only that the configuration fits an
// A100 80GB and that the estimate is within a factor of 3 of the published
// figure, so a change that breaks the memory model by an order of
// magnitude shows up; the ratio itself is reported, not tuned.
func TestSeedFigures(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-46s %10s %10s %7s   %s\n", "configuration (A100 80GB, fp16 AMP, AdamW)", "estimate", "published", "ratio", "estimate's parts")
	for _, s := range seeds {
		p := planFile(t, s.file)
		if !p.Fits || p.Device.Name != "a100-80gb" || !p.Precision.Mixed {
			t.Errorf("%s: fits %v on %s in %s", s.file, p.Fits, p.Device.Name, p.Precision.Compute)
		}
		m := p.Memory
		est := float64(m.Total) / 1e9
		ratio := est / s.published
		fmt.Fprintf(&b, "%-46s %8.1f GB %8.1f GB %7.2f   weights+grads+Adam %.1f GB, activations %.1f GB, workspace %.1f GB, batch %.1f GB\n",
			s.what, est, s.published, ratio, float64(m.Parameters+m.Master+m.Gradients+m.Optimizer)/1e9,
			float64(m.Activations)/1e9, float64(m.Workspace)/1e9, float64(m.Input)/1e9)
		if s.published > 0 && (ratio < 1.0/3 || ratio > 3) {
			t.Errorf("%s: estimate %.1f GB is not within a factor of 3 of the published %.1f GB", s.file, est, s.published)
		}
	}
	t.Log(b.String())
}

// layers200 is a hand-written model of 200 layers: 40 blocks of conv ->
// batchnorm -> relu -> conv -> batchnorm (the first block of every five
// labelled and added back after the fifth), then gap and dense.
func layers200(device string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "device %s\nprecision bf16\n", device)
	b.WriteString("device small { memory 1GiB  bandwidth 500GB/s  fp32 10TFLOPS  fp16 40TFLOPS  bf16 40TFLOPS }\n")
	b.WriteString("source data synthetic { samples 1000 shape [64, 56, 56] classes 10 }\n")
	b.WriteString("model deep {\n  input [64, 56, 56]\n")
	const block = "conv 64 k3 pad1 -> batchnorm -> relu -> conv 64 k3 pad1 -> batchnorm"
	for i := range 40 {
		switch i % 5 {
		case 0:
			fmt.Fprintf(&b, "  x%d = %s\n", i, block)
		case 4:
			fmt.Fprintf(&b, "  %s -> add x%d\n", block, i-4)
		default:
			fmt.Fprintf(&b, "  %s\n", block)
		}
	}
	b.WriteString("  gap -> dense 10\n}\n")
	b.WriteString("train { epochs 1  batch auto  optimizer adam  loss cross_entropy }\n")
	return []byte(b.String())
}

func TestLayers200(t *testing.T) {
	src := layers200("small")
	p := planSource(t, "deep.pipe", src)
	if len(p.Layers) < 200 {
		t.Fatalf("the model has %d nodes", len(p.Layers))
	}
	if len(p.Checkpoint.Segments) == 0 {
		t.Errorf("on a 1 GiB device the 200-layer model should need checkpointing at batch %d", p.BatchSize)
	}
}

// BenchmarkPlan200Layers plans a 200-layer model from its checked program:
// on an A100 (everything fits; the planner still finds the least peak to
// say what checkpointing would allow) and on a 1 GiB device where the batch
// and the checkpoint segments are solved together.
func BenchmarkPlan200Layers(b *testing.B) {
	for _, dev := range []string{"a100-80gb", "small"} {
		src := layers200(dev)
		f, _ := lang.Parse("deep.pipe", src)
		prog, ds := lang.Check(f, stdlib.Schema())
		if ds.HasErrors() {
			b.Fatal(ds)
		}
		dec := progtest.Decoded(b, prog)
		b.Run(dev, func(b *testing.B) {
			for b.Loop() {
				if _, ds := planner.Plan(dec, planner.WithCosts(costs.Engines()...), planner.WithHost(host), planner.WithSource(src)); ds.HasErrors() {
					b.Fatal(ds)
				}
			}
		})
	}
}

// TestSeedFilesListed keeps every .pipe file of bench in the seed table.
func TestSeedFilesListed(t *testing.T) {
	paths, _ := filepath.Glob("*.pipe")
	listed := map[string]bool{}
	for _, s := range seeds {
		listed[s.file] = true
	}
	for _, p := range paths {
		if !listed[p] {
			t.Errorf("%s is not in the seed table", p)
		}
	}
}
