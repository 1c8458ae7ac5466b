package planner

import (
	"slices"
	"strings"
	"testing"

	"pipe/planner/plan"
)

// TestDataOnDevice: the training set lies on the device where the engine
// can keep it and it fits what the step's plan leaves of the budget, its
// bytes in the memory plan; otherwise it stays on the host, and the plan
// says why: too large, samples a device cannot normalise as the loader
// does, an engine without the trait, several ranks, the CPU (unless
// asked), a plan made without the data.
func TestDataOnDevice(t *testing.T) {
	src := strings.Replace(program("mlp", "a100-80gb", "fp32", "batch 128"), models["mlp"], "input [1, 28, 28]\n  flatten -> mlp hidden [256, 128] out 10", 1)
	fashion := DeviceData{Bytes: 47_040_000 + 60_000, What: "source train, 60000 images of 784 bytes and their labels, as bytes"}
	base, ds := planSrc(t, src, WithEngine("torch"))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	if d := base.DataOnDevice; d == nil || d.On || !strings.Contains(d.Reason, "without reading the training source") {
		t.Fatalf("no data facts: %+v", d)
	}
	for _, c := range []struct {
		name string
		src  string
		opts []Option
		on   bool
		why  string
	}{
		{"fits", src, []Option{WithDeviceData(fashion)}, true, "44.9 MiB (source train, 60000 images"},
		{"too large", src, []Option{WithDeviceData(DeviceData{Bytes: 90 << 30, What: "a big set"})}, false, "too large: 90.0 GiB (a big set) against the 71.4 GiB"},
		{"not bytes", src, []Option{WithDeviceData(DeviceData{Not: "source s augments each sample on the host"})}, false, "augments each sample"},
		{"native", strings.Replace(src, "device a100-80gb", "device cpu", 1), []Option{WithDeviceData(fashion), WithEngine("native")}, false, "the native engine keeps no training set"},
		{"ranks", src, []Option{WithDeviceData(fashion), WithDevices(2, 1)}, false, "the 2 ranks"},
		{"cpu", strings.Replace(src, "device a100-80gb", "device cpu", 1), []Option{WithDeviceData(fashion)}, false, "on the CPU the worker reads each batch"},
		{"cpu asked", strings.Replace(src, "device a100-80gb", "device cpu", 1), []Option{WithDeviceData(fashion), WithDataOnDevice(true)}, true, "fit the"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, ds := planSrc(t, c.src, append([]Option{WithEngine("torch")}, c.opts...)...)
			if ds.HasErrors() || p == nil {
				t.Fatal(ds)
			}
			d := p.DataOnDevice
			if d == nil || d.On != c.on || !strings.Contains(d.Reason, c.why) {
				t.Fatalf("data on device %+v, want on %v because %q", d, c.on, c.why)
			}
			var dec *plan.Decision
			for i := range p.Decisions {
				if p.Decisions[i].What == "data on device" {
					dec = &p.Decisions[i]
				}
			}
			if dec == nil || dec.Reason != d.Reason || (dec.Value == "on") != c.on {
				t.Errorf("decision %+v, want the plan's %+v", dec, d)
			}
			m := p.Memory
			if !c.on {
				if m.DeviceData != 0 {
					t.Errorf("off, and %d bytes priced", m.DeviceData)
				}
				return
			}
			if m.DeviceData != fashion.Bytes {
				t.Errorf("device data priced at %d bytes, want %d", m.DeviceData, fashion.Bytes)
			}
			if p.Backend == plan.BackendGPU && !slices.ContainsFunc(m.Terms, func(t plan.MemoryTerm) bool {
				return t.Name == "training set on the device" && t.Bytes == fashion.Bytes && len(t.Phases) == 3
			}) {
				t.Errorf("a GPU plan with data on device has no term for it: %+v", m.Terms)
			}
			// The same plan without the data: the total is less by the bytes.
			off, _ := planSrc(t, c.src, WithEngine("torch"), WithDeviceData(DeviceData{Not: "off"}))
			if add := m.Total - off.Memory.Total; add < fashion.Bytes || add > fashion.Bytes+4<<20 || p.BatchSize != off.BatchSize {
				t.Errorf("total %d, without the data %d at batch %d (now %d): want the bytes added (and at most two segments' rounding)", m.Total, off.Memory.Total, off.BatchSize, p.BatchSize)
			}
		})
	}
}
