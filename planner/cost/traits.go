package cost

import (
	"fmt"
	"slices"
	"sort"
	"sync"

	"pipe/planner/plan"
	"pipe/spec"
)

// Traits is what an engine says of itself that the planner reads: where
// it computes, what it can do, and how a run's memory is laid out around
// it. The planner branches on these and never on an engine's name, so
// that a new engine is its own folder and one registration
// (docs/design/engines.md).
type Traits struct {
	// Devices are the device kinds the engine computes on
	// (plan.BackendCPU, plan.BackendGPU).
	Devices []string
	// Auto are the device kinds on which engine auto takes this engine;
	// one registered engine a kind.
	Auto []string
	// DataParallel says it trains on several devices at once
	// (--nproc-per-node, --nnodes), which the plan's Distributed lays out.
	DataParallel bool
	// Int8 says it runs predict's and serve's precision int8.
	Int8 bool
	// CPUAutocast says it runs bf16 mixed precision on the CPU; without
	// it a CPU plan computes in fp32.
	CPUAutocast bool
	// InProcess says it computes in pipe's own process and lays each
	// step out in an arena (Memory.Arena): the planner prices the
	// process as pipe's (its runtime, the data it holds, the Go
	// runtime's soft memory limit). Without it the engine computes in a
	// worker, priced by its allocator (Memory.Allocator).
	InProcess bool
	// LoaderInBudget says the loader's batches share the training
	// budget: the engine's process holds them, dataset's free list
	// keeps Workers × Prefetch + 2 of them (twice when the run
	// evaluates), and the batch is chosen counting them. Without it
	// they get a quarter of the host's available memory, as a
	// DataLoader's Workers × Prefetch batches, and shrink to fit it.
	LoaderInBudget bool
	// DatasetSamples says a sample's bytes in the loader are dataset's
	// batch format (fp32 inputs, a class index per output position for
	// cross_entropy, a raster target's mask, the sample's index); without
	// it, fp32 inputs and the loss's targets as they cross to a device.
	DatasetSamples bool
	// DeviceData says it can keep a training set on its device and
	// gather each batch there by index (samples.Resident): the planner
	// decides plan.DataOnDevice where the set fits.
	DeviceData bool
	// InputSlots is how many input batches the engine's process holds at
	// once, each resident (a worker reads them in turn from memory it
	// shares with pipe); 0 where the engine reads the loader's batches
	// in place.
	InputSlots int
}

// Runs says whether the engine computes on the device kind.
func (t Traits) Runs(kind string) bool { return slices.Contains(t.Devices, kind) }

// registry holds the engines that registered themselves, by name.
var registry = struct {
	sync.Mutex
	byName map[string]Engine
}{byName: map[string]Engine{}}

// Register adds an engine; each engine calls it from its package's init,
// as the ops register their kernels. It registers the name in spec too,
// whence the engine field and a plan's engine take the known names. A
// second engine of the same name is a programming error, and panics at
// start-up.
func Register(e Engine) {
	registry.Lock()
	defer registry.Unlock()
	if _, ok := registry.byName[e.Name()]; ok {
		panic(fmt.Sprintf("cost: engine %q registered twice", e.Name()))
	}
	registry.byName[e.Name()] = e
	spec.RegisterEngine(e.Name())
}

// Registered returns the registered engines, by name.
func Registered() []Engine {
	registry.Lock()
	defer registry.Unlock()
	out := make([]Engine, 0, len(registry.byName))
	for _, e := range registry.byName {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Explainer is a descriptor's optional facet that says in the engine's
// own words why a plan takes it and why a device refuses it; without it
// the planner says so plainly.
type Explainer interface {
	// Chosen is the engine decision's reason on dev: auto says engine
	// auto took it; blas names the host's BLAS where the device is this
	// host and it is known, else "".
	Chosen(dev plan.Device, auto bool, blas string) string
	// Refused is the error's summary and detail where the file asks for
	// the engine on a device it does not compute on.
	Refused(dev plan.Device) (summary, detail string)
}
