package planner

import (
	"fmt"
	"strings"
	"testing"
)

const ganSrc = `pipeline t
source s synthetic { samples 32  shape [3, 16, 16] }
model g { input [3, 16, 16]  conv 8 k3 pad1 -> instancenorm affine -> leakyrelu 0.2 -> conv 3 k3 pad1 -> tanh }
model d { input [6, 16, 16]  conv 8 k4 s2 pad1 -> leakyrelu 0.2 -> conv 1 k3 pad1 }
train { epochs 1  batch 4  mode gan  discriminator d conditional  d_optimizer sgd lr 0.1 momentum 0.9  l1 100  adversarial lsgan }
`

// TestGANPlansBothModels: the plan trains the generator (loss mae, the L1
// term) and plans the discriminator at the same batch, with its own
// optimizer's state, and its memory is in the total.
func TestGANPlansBothModels(t *testing.T) {
	p, ds := planSrc(t, ganSrc, WithDevice("cpu"))
	if ds.HasErrors() || p == nil {
		t.Fatal(ds)
	}
	gan := p.GAN
	if p.Model != "g" || p.Loss != "mae" || gan == nil || gan.Discriminator != "d" || !gan.Conditional || gan.Adversarial != "lsgan" || gan.L1 != 100 {
		t.Fatalf("model %s loss %s gan %+v", p.Model, p.Loss, gan)
	}
	// d: conv 6->8 k4 (768+8) and conv 8->1 k3 (72+1).
	if gan.Parameters != 849 || gan.Optimizer.Kind != "sgd" || gan.Memory.Optimizer != 849*4 || gan.Memory.Gradients != 849*4 {
		t.Errorf("discriminator: %d parameters, %+v, memory %+v", gan.Parameters, gan.Optimizer, gan.Memory)
	}
	m := gan.Memory
	if m.Fake != 4*3*16*16*4 || m.InputGradient != 4*6*16*16*4 || m.Activations <= 0 {
		t.Errorf("discriminator memory %+v", m)
	}
	q, ds := planSrc(t, "pipeline t\nsource s synthetic { samples 32  shape [3, 16, 16] }\nmodel g { input [3, 16, 16]  conv 8 k3 pad1 -> instancenorm affine -> leakyrelu 0.2 -> conv 3 k3 pad1 -> tanh }\ntrain { epochs 1  batch 4  loss mae }\n", WithDevice("cpu"))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	if got := p.Memory.Total - q.Memory.Total; got != m.Total {
		t.Errorf("the gan plan's total is %d more than the generator's alone, the discriminator's is %d", got, m.Total)
	}
}

// ganBatchSrc has a discriminator far larger than its generator, on a
// device of DEV: batch BATCH.
const ganBatchSrc = `pipeline t
device tiny { KIND  bandwidth 500GB/s  fp32 10TFLOPS }
device tiny
source s synthetic { samples 100000  shape [3, 64, 64] }
model g { input [3, 64, 64]  conv 3 k3 pad1 }
model d { input [3, 64, 64]  conv 64 k3 pad1 -> leakyrelu 0.2 -> conv 64 k3 pad1 -> leakyrelu 0.2 -> conv 1 k3 pad1 }
train { epochs 1  batch BATCH  checkpoint none  MODE }
`

// TestGANBatchCountsTheDiscriminator: an auto batch in gan mode is sized
// with the discriminator's memory beside the generator's, so the plan
// fits and one sample more would not, where the generator alone would
// take a larger batch; a batch that does not fit says the
// discriminator's share. On the CPU's and a GPU's cost models.
func TestGANBatchCountsTheDiscriminator(t *testing.T) {
	for _, kind := range []string{"kind cpu  memory 2GiB ", "memory 256MiB "} {
		t.Run("device "+kind, func(t *testing.T) {
			src := func(batch, mode string) string {
				return strings.NewReplacer("KIND ", kind, "BATCH", batch, "MODE", mode).Replace(ganBatchSrc)
			}
			gan := "mode gan  discriminator d  adversarial bce"
			p, ds := planSrc(t, src("auto(max 100000)", gan), fitOnly())
			if ds.HasErrors() || p == nil {
				t.Fatal(ds)
			}
			if !p.Fits || p.Memory.Total > p.Memory.Budget || p.GAN == nil {
				t.Fatalf("batch %d: %d planned for a budget of %d", p.BatchSize, p.Memory.Total, p.Memory.Budget)
			}
			alone, ds := planSrc(t, src("auto(max 100000)", "model g  loss mae"), fitOnly())
			if ds.HasErrors() {
				t.Fatal(ds)
			}
			if 2*p.BatchSize > alone.BatchSize {
				t.Errorf("batch %d with the discriminator, %d for the generator alone", p.BatchSize, alone.BatchSize)
			}
			t.Logf("batch %d with the discriminator (total %d of %d), %d alone", p.BatchSize, p.Memory.Total, p.Memory.Budget, alone.BatchSize)
			next := fmt.Sprint(p.BatchSize + 1)
			q, ds := planSrc(t, src(next, gan))
			if q == nil || q.Fits {
				t.Fatalf("batch %s fits as well", next)
			}
			var found bool
			for _, d := range ds {
				found = found || (d.Code == CodeNoFit && strings.Contains(d.Detail, "the discriminator d takes"))
			}
			if !found {
				t.Errorf("no diagnostic names the discriminator's share: %v", ds)
			}
		})
	}
}
