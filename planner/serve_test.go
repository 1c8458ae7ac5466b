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

// An image model's decodes are bounded by its input: the header may
// claim max_decode_factor times the input's pixels, at least the floor;
// they run one per core by default, and their memory is in the plan's.
// A model that reads no images plans none.
func TestServeDecodes(t *testing.T) {
	p, ds := planSrc(t, fashionWith(t, ""), WithDevice("cpu"), WithServe())
	if ds.HasErrors() || p.Serve == nil {
		t.Fatalf("fashion: %v", ds)
	}
	s := p.Serve
	// 16 x 28 x 28 is under the floor; testHost has 2 cores.
	if s.MaxDecodePixels != ServeDecodeFloorPixels || s.DecodeBytes != ServeDecodeFloorPixels*ServeDecodeBytesPerPixel || s.Decodes != 2 {
		t.Errorf("fashion: decode limit %d pixels, %d bytes a decode, %d at once; want %d, %d, 2",
			s.MaxDecodePixels, s.DecodeBytes, s.Decodes, ServeDecodeFloorPixels, ServeDecodeFloorPixels*ServeDecodeBytesPerPixel)
	}
	if s.Memory < s.Decodes*s.DecodeBytes+s.Queue*s.RequestBytes || s.Memory > s.Budget {
		t.Errorf("fashion: memory %d leaves out the decodes' %d, or is over the budget %d", s.Memory, s.Decodes*s.DecodeBytes, s.Budget)
	}
	whats := map[string]bool{}
	for _, d := range s.Decisions {
		whats[d.What] = d.Reason != ""
	}
	if !whats["decode limit"] || !whats["decodes"] {
		t.Errorf("no reasoned decision for the decodes: %+v", s.Decisions)
	}

	p, ds = planSrc(t, fashionWith(t, "serve { max_decode_factor 10000  decodes 3 }"), WithDevice("cpu"))
	if ds.HasErrors() || p.Serve.MaxDecodePixels != 10000*28*28 || p.Serve.Decodes != 3 {
		t.Errorf("max_decode_factor 10000, decodes 3: %d pixels, %d decodes\n%v", p.Serve.MaxDecodePixels, p.Serve.Decodes, ds)
	}

	// 4 decodes of 78.4 Mpixel at 20 bytes a pixel are 5.8 GiB: not in 3 GiB.
	src := strings.Replace(fashionWith(t, "serve { max_decode_factor 100000  decodes 4 }"), "pipeline fashion",
		"pipeline fashion\ndevice small\ndevice small { kind cpu  memory 3GiB  bandwidth 10GB/s  fp32 100GFLOPS  cores 2 }", 1)
	p, ds = planSrc(t, src)
	if p == nil || p.Serve == nil || p.Serve.Fits || !diagAt(ds, CodeNoFit, 18) {
		t.Errorf("decodes of 1.5 GiB each on 3 GiB: %+v\n%v", p.Serve, ds)
	}

	b, err := os.ReadFile("../examples/pharma.pipe")
	if err != nil {
		t.Fatal(err)
	}
	p, ds = planSrc(t, string(b), WithDevice("cpu"), WithServe())
	if p == nil || p.Serve == nil || p.Serve.MaxDecodePixels != 0 || p.Serve.Decodes != 0 {
		t.Errorf("pharma reads no images, yet plans decodes: %+v\n%v", p.Serve, ds)
	}
}
