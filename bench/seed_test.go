package bench

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pipe/bench/torchspec"
	"pipe/engine"
	"pipe/planner"
)

// seedSteps are the seed configurations as TestSeedsTrainOnCPU runs them:
// the file's network at a smaller input where the published one would take
// minutes of the two cores a step (the layers, their widths and the
// encoder are the file's; only the tiles shrink), at a small batch.
var seedSteps = []struct {
	file     string
	from, to string // the input shape's spatial size, replaced in a copy
	batch    int64
	// depth, when set, replaces the file's "depth 24" line: fewer of the
	// same blocks.
	depth string
}{
	// 512x512 to 128x128: depth 5 halves five times, 128 divides by 32.
	{"unet_resnet50.pipe", "512, 512", "128, 128", 1, ""},
	// 512x512 to 64x64: depth 5 halves five times, 64 divides by 32.
	{"unet_efficientnet_b4.pipe", "512, 512", "64, 64", 2, ""},
	// 512x512 to 128x128: output stride 16 leaves 8x8 features, where the
	// ASPP's rate-12 taps still fall outside; batch 2, as the ASPP's
	// pooled branch normalises one value per channel and sample (PyTorch
	// refuses that at batch 1).
	{"deeplabv3plus_resnet101.pipe", "512, 512", "128, 128", 2, ""},
	// 224x224 to 64x64: 16 patches of 16x16 instead of 196; 2 of ViT-L's
	// 24 encoder layers, each as written (width 1024, 16 heads, MLP 4096).
	// All 24 hold 304M parameters: the step's parameters, gradients, Adam
	// moments and the test's two state copies peaked at 11.5 GiB (VmHWM),
	// and two make test runs side by side met the OOM killer.
	{"vit_l16.pipe", "224, 224", "64, 64", 1, "depth   2"},
}

// TestSeedsTrainOnCPU plans each seed configuration for the CPU (as
// pipe run --device cpu --batch N would) and runs one training step on the
// native engine: the forward pass, the loss, the backward pass and the
// optimizer's update, on a random batch of the plan's shapes (the files'
// synthetic sources give one label per sample, which pipe run refuses for
// the segmentation networks' per-pixel outputs). The loss must be finite
// and the update must move the parameters. A network the native engine
// cannot build yet is skipped, naming the op it lacks.
func TestSeedsTrainOnCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ResNet-50, ResNet-101 and ViT-L networks")
	}
	for _, c := range seedSteps {
		t.Run(strings.TrimSuffix(c.file, ".pipe"), func(t *testing.T) {
			src, err := os.ReadFile(c.file)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(src), c.from); n != 2 {
				t.Fatalf("%s names the input size %q %d times; the test rewrites the source's and the model's", c.file, c.from, n)
			}
			text := strings.ReplaceAll(string(src), c.from, c.to)
			if c.depth != "" {
				if !strings.Contains(text, "depth   24") {
					t.Fatalf("%s has no \"depth   24\" line to replace", c.file)
				}
				text = strings.Replace(text, "depth   24", c.depth, 1)
			}
			path := filepath.Join(t.TempDir(), c.file)
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := torchspec.Load(path, 2, planner.WithBatch(c.batch))
			if err != nil {
				t.Fatal(err)
			}
			if m.Config.Batch != int(c.batch) {
				t.Fatalf("planned batch %d, want %d", m.Config.Batch, c.batch)
			}
			mod, err := m.Build()
			if errors.Is(err, engine.ErrUnsupported) {
				t.Skipf("the native engine cannot build %s yet: %v (its ops on token sequences [T, D]: %s)", c.file, err, strings.Join(sequenceOps(m), ", "))
			}
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close()
			before := mod.State()
			b := torchspec.RandomBatch(m.Graph, m.Config.Loss.Kind, m.Config.Batch, 1)
			mod.ZeroGrad()
			loss, err := mod.TrainStep(b, 1)
			if err != nil {
				t.Fatal(err)
			}
			if math.IsNaN(loss) || math.IsInf(loss, 0) || loss <= 0 {
				t.Fatalf("loss %v", loss)
			}
			if err := mod.Step(m.LR); err != nil {
				t.Fatal(err)
			}
			after := mod.State()
			moved := 0
			for _, x := range before.Tensors {
				y := after.Lookup(x.Name)
				if strings.HasPrefix(x.Name, "optimizer.") || y == nil {
					continue
				}
				for i := range x.Data {
					if x.Data[i] != y.Data[i] {
						moved++
						break
					}
				}
			}
			if moved == 0 {
				t.Fatal("the step moved no parameter")
			}
			t.Logf("%s at %s, batch %d: %d parameters, loss %.4f, %d tensors moved", c.file, c.to, c.batch, m.Graph.Params(), loss, moved)
		})
	}
}

// sequenceOps are the distinct ops of m's graph that read or make a
// token sequence [T, D], in graph order: a vision transformer's, which
// the native engine gains with the ViT kernels.
func sequenceOps(m *torchspec.Model) []string {
	var ops []string
	for _, n := range m.Graph.Nodes {
		seq := len(n.Out) == 2
		for _, in := range n.In {
			seq = seq || len(in) == 2
		}
		if seq && !slices.Contains(ops, n.Op) {
			ops = append(ops, n.Op)
		}
	}
	return ops
}
