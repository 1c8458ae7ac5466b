package torch

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"

	"pipe/dataset"
	"pipe/engine"
	"pipe/engine/native"
	"pipe/internal/progtest"
	"pipe/internal/torchtest"
	"pipe/run"
)

// torchvisionEffNet writes torchvision's efficientnet_bN (argv[2]; seed
// 0, eval), two 96×96 images and its outputs on them into a folder, as
// torchvisionViT does. Every batchnorm's running statistics, scale and
// shift are drawn at random so that they matter.
const torchvisionEffNet = `
import json, sys, torch, torchvision
out, name = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
m = getattr(torchvision.models, name)(weights=None).eval()
with torch.no_grad():
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.normal_(std=0.1)
            mod.running_var.uniform_(0.5, 1.5)
            mod.weight.uniform_(0.5, 1.5)
            mod.bias.normal_(std=0.1)
    x = torch.randn(2, 3, 96, 96, generator=torch.Generator().manual_seed(1))
    y = m(x)
` + tensorDump

// TestEfficientNetMatchesTorchvision: pipe's efficientnet_b0 and b4 on the
// native engine, given torchvision's weights by name, compute its outputs
// on two 96×96 images within 1e-5 of their largest value.
func TestEfficientNetMatchesTorchvision(t *testing.T) {
	py := torchtest.Python(t, "torchvision")
	for _, name := range []string{"efficientnet_b0", "efficientnet_b4"} {
		t.Run(name, func(t *testing.T) {
			tv := torchvisionTensors(t, py, torchvisionEffNet, name)
			src := "pipeline e\nsource d synthetic { samples 4  shape [3, 96, 96]  classes 1000 }\nmodel m {\n  input [3, 96, 96]\n  " + name + "\n}\ntrain { epochs 1  batch 2  optimizer sgd lr 0.1  loss cross_entropy }\n"
			prog, p, g := loadSrc(t, name+".pipe", []byte(src))
			cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
			cfg.Batch, cfg.Threads, cfg.Checkpoint = 2, 2, nil
			m, err := native.Backend{}.Build(g, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			st := m.State()
			copied := 0
			for _, x := range st.Tensors {
				if strings.HasPrefix(x.Name, "optimizer.") {
					continue
				}
				v, ok := tv[x.Name]
				if !ok || len(v) != len(x.Data) {
					t.Fatalf("pipe's %s (%v) has no counterpart of its size in torchvision's state_dict", x.Name, x.Shape)
				}
				copy(x.Data, v)
				copied++
			}
			if copied != len(tv)-2 {
				t.Errorf("copied %d tensors; torchvision's state_dict has %d", copied, len(tv)-2)
			}
			if err := m.SetState(st); err != nil {
				t.Fatal(err)
			}
			out := make([]float32, 2000)
			if _, err := m.Eval(&dataset.Batch{N: 2, X: tv["x"]}, out); err != nil {
				t.Fatal(err)
			}
			var worst, scale float64
			for i, v := range tv["y"] {
				worst = math.Max(worst, math.Abs(float64(out[i]-v)))
				scale = math.Max(scale, math.Abs(float64(v)))
			}
			if worst > 1e-5*scale || scale == 0 {
				t.Errorf("pipe's output differs from torchvision's by %.3g (largest output %.3g)", worst, scale)
			}
			t.Logf("largest difference %.3g, %.2g of the largest output %.3g", worst, worst/scale, scale)
		})
	}
}

// tensorDump ends a torchvision script: it writes m's state_dict (less
// batchnorm's step counters), the input x and the output y to the folder
// out as torchvisionTensors reads them.
const tensorDump = `index, blobs, off = [], [], 0
for name, t in list(m.state_dict().items()) + [("x", x), ("y", y)]:
    if name.endswith("num_batches_tracked"):
        continue
    t = t.detach().float().contiguous()
    index.append({"name": name, "shape": list(t.shape), "offset": off})
    blobs.append(t.numpy().tobytes())
    off += t.numel()
open(out + "/tensors.bin", "wb").write(b"".join(blobs))
json.dump(index, open(out + "/index.json", "w"))
`

// torchvisionTensors runs script (which writes index.json and
// tensors.bin into argv[1]) with args and reads the tensors by name.
func torchvisionTensors(t *testing.T, py, script string, args ...string) map[string][]float32 {
	t.Helper()
	dir := t.TempDir()
	if out, err := osexec.Command(py, append([]string{"-c", script, dir}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("torchvision: %v\n%s", err, out)
	}
	var index []struct {
		Name   string
		Shape  []int64
		Offset int64
	}
	js, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil || json.Unmarshal(js, &index) != nil {
		t.Fatalf("index: %v", err)
	}
	blob, err := os.ReadFile(filepath.Join(dir, "tensors.bin"))
	if err != nil {
		t.Fatal(err)
	}
	tv := map[string][]float32{}
	for _, e := range index {
		n := int64(1)
		for _, d := range e.Shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(blob[4*(e.Offset+int64(i)):]))
		}
		tv[e.Name] = v
	}
	return tv
}

// TestEfficientNetDeadShiftsStayPut: efficientnet_b0 (dropout and
// drop_path 0) trains five Adam steps on either engine from the same
// state, each engine on its own (no state passed between them). The 16
// shifts whose gradient is zero in exact arithmetic (Graph.ZeroGradients)
// stay where they started on both, their Adam moments at zero: before the
// engines zeroed those gradients, Adam stepped on their rounding noise.
// The first losses agree within lossTol; the later ones are logged, not
// held: free float32 runs part ways (docs/design/zero-gradients.md).
func TestEfficientNetDeadShiftsStayPut(t *testing.T) {
	py := testPython(t)
	src := "pipeline e\nsource d synthetic { samples 8  shape [3, 64, 64]  classes 10 }\nmodel m {\n  input [3, 64, 64]\n  efficientnet_b0 classes 10  dropout 0  drop_path 0\n}\ntrain { epochs 1  batch 2  optimizer adam lr 1e-3  loss cross_entropy  checkpoint none }\n"
	prog, p, g := loadSrc(t, "effnet_free.pipe", []byte(src))
	dead := g.ZeroGradients()
	if len(dead) != 16 {
		t.Fatalf("ZeroGradients names %d shifts, want efficientnet_b0's 16: %v", len(dead), dead)
	}
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Batch, cfg.Threads, cfg.Checkpoint = 2, 2, nil
	nm, err := native.Backend{}.Build(g, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nm.Close()
	tm := buildTorch(t, g, cfg, Backend{Python: py})
	start := nm.State()
	if err := tm.SetState(start); err != nil {
		t.Fatal(err)
	}
	engines := []engine.Model{nm, tm}
	for step := range 5 {
		b := randomBatch(g, cfg.Loss.Kind, cfg.Batch, uint64(step+1))
		var losses [2]float64
		for i, m := range engines {
			m.ZeroGrad()
			l, err := m.TrainStep(b, 1)
			if err != nil {
				t.Fatalf("step %d: %v", step+1, err)
			}
			if err := m.Step(1e-3); err != nil {
				t.Fatal(err)
			}
			losses[i] = l
		}
		d := math.Abs(losses[1]-losses[0]) / math.Abs(losses[0])
		t.Logf("step %d: loss native %.8g, torch %.8g (%.2e)", step+1, losses[0], losses[1], d)
		if step == 0 && d > lossTol {
			t.Errorf("step 1: loss native %.8g, torch %.8g (relative difference %.2e > %.0e)", losses[0], losses[1], d, lossTol)
		}
	}
	for i, m := range engines {
		st := m.State()
		for _, name := range dead {
			x0, x := start.Lookup(name), st.Lookup(name)
			m1 := st.Lookup("optimizer." + name + ".exp_avg")
			if x0 == nil || x == nil || m1 == nil {
				t.Fatalf("%s or its exp_avg is missing", name)
			}
			var moved, mom float64
			for j, v := range x0.Data {
				moved = math.Max(moved, math.Abs(float64(x.Data[j]-v)))
				mom = math.Max(mom, math.Abs(float64(m1.Data[j])))
			}
			if moved != 0 || mom != 0 {
				t.Errorf("%s: %s moved by up to %.3g (exp_avg up to %.3g); its gradient is zero", []string{"native", "torch"}[i], name, moved, mom)
			}
		}
	}
}
