package planner

import (
	"os"
	"strings"
	"testing"
)

func fashionWith(t *testing.T, serve string) string {
	t.Helper()
	b, err := os.ReadFile("../examples/fashion.pipe")
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + serve + "\n"
}

// A file without a serve block plans no serving unless asked; with
// WithServe every choice is automatic and has its reason.
func TestServePlannedOnlyWhenAsked(t *testing.T) {
	src := fashionWith(t, "")
	if p, _ := planSrc(t, src, WithDevice("cpu")); p == nil || p.Serve != nil {
		t.Fatalf("no serve block: serving planned anyway")
	}
	p, ds := planSrc(t, src, WithDevice("cpu"), WithServe())
	if ds.HasErrors() || p.Serve == nil {
		t.Fatalf("WithServe: %v", ds)
	}
	s := p.Serve
	whats := map[string]bool{}
	for _, d := range s.Decisions {
		whats[d.What] = d.Reason != ""
	}
	for _, w := range []string{"workers", "max_batch", "max_wait", "queue", "timeout", "body limit", "precision"} {
		if !whats[w] {
			t.Errorf("no reasoned decision for %s: %+v", w, s.Decisions)
		}
	}
	// testHost has 2 cores: one worker with both.
	if s.Workers != 1 || s.ThreadsPerWorker != 2 || s.MaxBatch < 1 || s.MaxWaitSeconds != ServeMaxWait || !s.Fits {
		t.Errorf("serving plan %+v", s)
	}
	if s.Memory > s.Budget || s.Queue < 1 || s.MaxBodyBytes < s.MaxBatch*784*ServeJSONBytesPerValue {
		t.Errorf("memory %d of budget %d, queue %d, body %d", s.Memory, s.Budget, s.Queue, s.MaxBodyBytes)
	}
}

// max_batch auto is the largest batch whose estimated forward time and
// max_wait fit the latency target: a tighter target never gives a larger
// batch, and the forward time at the chosen batch is within the target.
func TestServeBatchFollowsTheLatencyTarget(t *testing.T) {
	var last int64 = 1 << 40
	for _, target := range []string{"200ms", "50ms", "20ms", "8ms"} {
		p, ds := planSrc(t, fashionWith(t, "serve { latency_target "+target+" }"), WithDevice("cpu"))
		if ds.HasErrors() || p.Serve == nil {
			t.Fatalf("%s: %v", target, ds)
		}
		s := p.Serve
		if s.MaxBatch > last {
			t.Errorf("latency_target %s: max_batch %d, larger than %d at a looser target", target, s.MaxBatch, last)
		}
		if s.ForwardSeconds+s.MaxWaitSeconds > s.LatencyTargetSeconds*1.001 {
			t.Errorf("latency_target %s: forward %g + wait %g over the target", target, s.ForwardSeconds, s.MaxWaitSeconds)
		}
		last = s.MaxBatch
	}
	if last >= ServeMaxBatchCap {
		t.Errorf("the tightest target left max_batch at the cap (%d)", last)
	}
}

// A target no batch meets turns batching off with a warning; a max_batch
// the memory cannot hold is an error at its line.
func TestServeLimits(t *testing.T) {
	p, ds := planSrc(t, fashionWith(t, "serve { latency_target 1us }"), WithDevice("cpu"))
	if p.Serve == nil || p.Serve.MaxBatch != 1 || p.Serve.MaxWaitSeconds != 0 || !diagAt(ds, CodeServeLatency, 16) {
		t.Errorf("an unmeetable target: %+v\n%v", p.Serve, ds)
	}
	src := strings.Replace(fashionWith(t, "serve { max_batch 60000  workers 2 }"), "pipeline fashion",
		"pipeline fashion\ndevice small\ndevice small { kind cpu  memory 3GiB  bandwidth 10GB/s  fp32 100GFLOPS  cores 2 }", 1)
	p, ds = planSrc(t, src)
	if p == nil || p.Serve == nil || p.Serve.Fits || !diagAt(ds, CodeNoFit, 18) {
		t.Fatalf("max_batch 60000 on 3 GiB: %+v\n%v", p.Serve, ds)
	}
}
