package torch

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"pipe/engine"
	"pipe/internal/progtest"
	"pipe/planner"
	"pipe/run"
	"pipe/stdlib"
)

// The saved-bytes ground truth. The largest term of a GPU plan is what
// autograd keeps for the backward pass, and those sizes do not depend on
// the device: a tensor saved on the CPU is the size it is on a GPU. So the
// tests pin it here, with Debian's PyTorch on the CPU: every example and
// every family is planned with the torch engine for the CPU, in fp32 and
// under bf16 autocast, and one training forward pass and its loss run in
// the worker under saved-tensor hooks, each storage counted once and
// attributed to the node that made it (or, for a cast copy, a mask or an
// op's inner tensors, to the node that saved it). The plan's layer table
// must be PyTorch's account, node by node.

// savedTol is how far a model's planned saved bytes may be from
// PyTorch's, and a layer's where it is more than savedSlack bytes off.
const savedTol = 0.01

// savedSlack is the bytes a layer may be off whatever its size: what
// does not grow with the batch and so is no part of a per-sample model.
// A batchnorm saves its batch's mean and inverse deviation, 2·C fp32
// values a layer (at most 2·2048·4 = 16 KiB, in a ResNet-50's last
// stage); a loss its 4-byte total weight; autocast casts a batchnorm's
// fp32 weight and bias where they meet bf16 inputs. Whole models are held
// to savedTol with nothing added.
const savedSlack = 16 << 10

type savedCase struct {
	name  string
	src   string
	batch int64
	// params, when set, is the reference implementation's count.
	params int64
}

// familySrc is a pipeline training one family call on synthetic data.
func familySrc(name string, input string, call string, classes int) string {
	return fmt.Sprintf(`pipeline %s
precision fp32
source train synthetic {
  samples 8
  shape   %s
  classes %d
  seed    1
}
model m {
  input %s
  %s
}
train {
  epochs     1
  batch      2
  optimizer  sgd lr 0.01
  loss       cross_entropy
  checkpoint none
}
`, name, input, classes, input, call)
}

// savedCases are every example and every family: resnet18/34/50/101 and
// unet plain and on each encoder at 128x128 (at 64x64 and batch 2 the
// batchnorms' per-batch statistics, which the per-sample plan leaves out,
// are over 1% of a ResNet-18's saved bytes: 38 KB of 3.5 MB),
// torchvision's vit_b_16 and vit_l_16 layouts at 224x224 (the layout needs
// it) and deeplabv3plus on resnet50 and resnet101 (128x128), at batch 2:
// at batch 1 attention's transposed input is contiguous, so its packed
// projection keeps a view of the layernorm's output where any larger
// batch keeps a copy, which is what the plan prices.
func savedCases(t *testing.T) []savedCase {
	var cs []savedCase
	files, err := filepath.Glob("../../examples/*.pipe")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name, batch := strings.TrimSuffix(filepath.Base(f), ".pipe"), int64(2)
		if name == "deeplab_olinda" {
			batch = 4 // 64x64 tiles: at batch 2 the batchnorms' statistics are 1.4% of the bytes (see below)
		}
		cs = append(cs, savedCase{name, string(src), batch, 0})
	}
	img := "[3, 128, 128]"
	for _, r := range []string{"resnet18", "resnet34", "resnet50", "resnet101"} {
		cs = append(cs, savedCase{r, familySrc(r, img, r+" classes 10", 10), 2, 0})
	}
	cs = append(cs, savedCase{"unet", familySrc("unet", img, "unet depth 4 width 16 out 2", 2), 2, 0})
	for _, r := range []string{"resnet18", "resnet34", "resnet50"} { // unet's encoders
		cs = append(cs, savedCase{"unet_" + r, familySrc("unet_"+r, img, "unet encoder "+r+" depth 5 width 16 out 2", 2), 2, 0})
	}
	cs = append(cs, savedCase{"groupnorm", familySrc("groupnorm", "[8, 16, 16]",
		"conv 16 k3 pad1 -> groupnorm 4 -> relu -> conv 16 k3 pad1 -> groupnorm 16 eps 1e-3 -> conv 2 k1", 2), 2, 0})
	vol := "[2, 8, 32, 32]" // the 3-D ops the U-Net does not use: trilinear and nearest upsampling, padded overlapping pools
	cs = append(cs, savedCase{"ops3d", familySrc("ops3d", vol, "conv3d 16 k3 pad1 -> batchnorm -> relu -> maxpool3d 3 s2 pad1 -> conv3d 16 k3 pad1 -> relu -> upsample3d 2 mode trilinear -> conv3d 8 k3 pad1 -> maxpool3d 2 -> upsample3d 2 -> conv3d 2 k1", 2), 2, 0})
	vit := "[3, 224, 224]"
	cs = append(cs,
		savedCase{"vit_b_16", familySrc("vit_b_16", vit, "vit patch 16 depth 12 heads 12 dim 768 mlp_dim 3072 classes 1000", 1000), 2, 86_567_656},
		savedCase{"vit_l_16", familySrc("vit_l_16", vit, "vit patch 16 depth 24 heads 16 dim 1024 mlp_dim 4096 classes 1000", 1000), 2, 304_326_632})
	// Attention with dropout on its probabilities and a causal mask,
	// averaged over the tokens.
	cs = append(cs, savedCase{"attention_dropout", familySrc("attention_dropout", "[3, 32, 32]",
		"patches 4 dim 32 -> class_token -> pos_embed -> layernorm -> attention heads 4 dropout 0.1 causal -> mean_tokens -> dense 10", 10), 2, 0})
	// Performer attention (random_attention): causal softmax features and
	// relu features, each with and without the causal prefix sums.
	for _, v := range []string{"", "causal", "kernel relu", "causal kernel relu"} {
		nm := strings.TrimSuffix("random_attention_"+strings.ReplaceAll(strings.ReplaceAll(v, "kernel ", ""), " ", "_"), "_")
		cs = append(cs, savedCase{nm, familySrc(nm, "[3, 32, 32]",
			"patches 4 dim 32 -> pos_embed -> layernorm -> random_attention heads 4 features 12 "+v+" -> mean_tokens -> dense 10", 10), 2, 0})
	}
	for _, r := range []string{"resnet50", "resnet101"} {
		cs = append(cs, savedCase{"deeplabv3plus_" + r, familySrc("deeplabv3plus_"+r, "[3, 128, 128]", "deeplabv3plus encoder "+r+" classes 2", 2), 2, 0})
	}
	// PIPE_SAVED_ONLY, a regular expression, narrows the cases by name
	// while working on one.
	if only := os.Getenv("PIPE_SAVED_ONLY"); only != "" {
		re := regexp.MustCompile(only)
		var keep []savedCase
		for _, c := range cs {
			if re.MatchString(c.name) {
				keep = append(keep, c)
			}
		}
		cs = keep
	}
	return cs
}

// withPrecision sets a pipeline's precision line.
func withPrecision(src, prec string) string {
	if strings.Contains(src, "\nprecision") {
		return regexp.MustCompile(`\nprecision +[a-z0-9]+`).ReplaceAllString(src, "\nprecision "+prec)
	}
	return strings.Replace(src, "\nsource", "\nprecision "+prec+"\nsource", 1)
}

// TestSavedBytesArePyTorchs compares, for every example and family in
// fp32 and under CPU bf16 autocast, the plan's saved bytes per layer with
// what autograd saved, and logs per model the planned and measured bytes
// and the layer furthest off.
func TestSavedBytesArePyTorchs(t *testing.T) {
	py := testPython(t)
	var table strings.Builder
	fmt.Fprintf(&table, "%-24s %-5s %13s %13s %8s  %-44s %11s %11s %6s\n",
		"model", "prec", "planned", "measured", "ratio", "worst layer", "planned", "measured", "secs")
	var worker *model
	defer func() {
		if worker != nil {
			worker.Close()
		}
	}()
	for _, c := range savedCases(t) {
		for _, prec := range []string{"fp32", "bf16"} {
			t.Run(c.name+"/"+prec, func(t *testing.T) {
				start := time.Now()
				src := withPrecision(c.src, prec)
				prog, p, g := loadSrc(t, c.name+".pipe", []byte(src), planner.WithEngine("torch"), planner.WithBatch(c.batch))
				if want := map[string]int64{"fp32": 4, "bf16": 2}[prec]; p.Precision.ActivationBytes != want {
					t.Fatalf("the plan stores activations in %d bytes", p.Precision.ActivationBytes)
				}
				if c.params != 0 && p.Parameters != c.params {
					t.Errorf("%d parameters; torchvision's layout has %d", p.Parameters, c.params)
				}
				cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
				cfg.Checkpoint = nil
				tm := savedModel(t, g, cfg, py, &worker)
				b := randomBatch(g, cfg.Loss.Kind, int(c.batch), 1)
				s, err := tm.SavedBytes(b, true)
				if err != nil {
					t.Fatal(err)
				}
				if prec == "bf16" && s.Bytes["parameter_casts"] == 0 {
					t.Error("autocast made no bf16 copy of the weights")
				}
				// The input batch is the plan's Memory.Input, not an
				// activation: it may be kept (by a first conv in fp32),
				// and is never larger than the batch.
				if in := s.Nodes[0].Bytes; in > c.batch*numel64(g.Input)*4 {
					t.Errorf("autograd keeps %d bytes of the input batch, more than the batch", in)
				}
				var planned, measured int64
				worst, worstDiff := -1, int64(-1)
				var bad []string
				for i, l := range p.Layers {
					if i == 0 {
						continue
					}
					got, want := s.Nodes[i].Bytes, l.ActivationBytes
					planned += want
					measured += got
					d := abs64(got - want)
					if d > worstDiff {
						worst, worstDiff = i, d
					}
					if d > savedSlack && float64(d) > savedTol*float64(max(got, want)) {
						bad = append(bad, fmt.Sprintf("%s (%s): planned %d, measured %d %v", l.Name, l.Op, want, got, s.Nodes[i].Dtypes))
					}
				}
				planned += p.Memory.LossSaved
				measured += s.Loss.Bytes
				if d := abs64(s.Loss.Bytes - p.Memory.LossSaved); d > savedSlack && float64(d) > savedTol*float64(s.Loss.Bytes) {
					bad = append(bad, fmt.Sprintf("the loss: planned %d, measured %d %v", p.Memory.LossSaved, s.Loss.Bytes, s.Loss.Dtypes))
				}
				if len(bad) > 0 {
					t.Errorf("%d layers off by more than %.0f%% and %d bytes:\n  %s", len(bad), 100*savedTol, savedSlack,
						strings.Join(bad[:min(len(bad), 12)], "\n  "))
				}
				ratio := float64(planned) / float64(measured)
				if math.Abs(ratio-1) > savedTol {
					t.Errorf("the plan saves %d bytes, autograd %d (ratio %.4f)", planned, measured, ratio)
				}
				wl := p.Layers[worst]
				fmt.Fprintf(&table, "%-24s %-5s %13d %13d %8.4f  %-44s %11d %11d %6.1f\n", c.name, prec, planned, measured, ratio,
					trunc(wl.Name, 44), wl.ActivationBytes, s.Nodes[worst].Bytes, time.Since(start).Seconds())
			})
		}
	}
	t.Log("bytes saved for backward, planned (torch engine) and measured (saved-tensor hooks), in fp32 and under CPU bf16 autocast:\n" + table.String())
}

// savedModel builds g on the worker of *prev (a new one where there is
// none, or it ran on other threads), which it then takes over, and from
// the worker's own initial weights: what autograd saves depends on
// neither, and one worker for all the cases saves a start (importing
// torch) and pipe's initial weights for each: 68 starts and 0.3 G values
// for vit_l_16 alone.
func savedModel(t *testing.T, g *stdlib.Graph, cfg engine.Config, py string, prev **model) *model {
	t.Helper()
	b := Backend{Python: py}
	m, err := b.newModel(g, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p := *prev; p != nil && p.cfg.Threads == cfg.Threads && !dead(p) {
		p.closeRegions()
		m.workers = p.workers
		m.watchWorkers()
	} else {
		if p != nil {
			p.Close()
		}
		if err := m.start(b, 1); err != nil {
			t.Fatal(err)
		}
	}
	*prev = m
	if err := m.build(b, engine.State{}); err != nil {
		t.Fatal(err)
	}
	return m
}

// dead says whether a worker of m has exited.
func dead(m *model) bool {
	select {
	case <-m.died:
		return true
	default:
		return false
	}
}

func numel64(s []int64) int64 {
	n := int64(1)
	for _, d := range s {
		n *= d
	}
	return n
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n+1:]
}
