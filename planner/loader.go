package planner

import (
	"fmt"
	"strings"

	"pipe/planner/plan"
	"pipe/spec"
	"pipe/stdlib"
)

// The loader. Sources that decode files per sample (images, geotiff) keep
// workers busy: up to one per core left after the training thread, at most
// 8 (beyond that a single device rarely waits for data). On the CPU backend
// the training itself uses the cores, so decoding gets a quarter of them.
// Sources held in memory (idx, csv, synthetic) need one worker to copy
// batches out while the step runs. Each worker keeps prefetch batches
// ready, 2 by default, as PyTorch's DataLoader does. The buffers must fit
// the host: on the CPU backend they share the budget with training (so the
// batch accounts for them); on a GPU they may take a quarter of the host's
// available memory, and prefetch, then workers, shrink until they do.

const defaultPrefetch = 2

var decodingSources = map[string]bool{"images": true, "geotiff": true}

type loaderChoice struct {
	workersAuto, prefetchAuto bool
	why                       string
}

func (pl *planner) loaderFor(g *stdlib.Graph) plan.Loader {
	ld := plan.Loader{Prefetch: defaultPrefetch}
	if src := pl.source(); src != nil {
		ld.Source, ld.Kind = src.Name, src.Kind
	}
	ld.SampleBytes = add(mul(numel(g.Input), 4), targetBytes(pl.loss(), g.OutShape()))
	if pl.traits().DatasetSamples {
		ld.SampleBytes = pl.cpuSampleBytes(g)
	}
	cores := max(pl.host.Cores, 1)
	if pl.dev.Kind == plan.BackendCPU {
		cores = max(pl.dev.Cores, 1)
	}
	// Ranks sharing a node share its cores: each plans its loader for
	// its own share, so that a node's ranks and their workers fit its
	// cores (an sbatch script asks for Workers+1 CPUs a task).
	share := ""
	if n := pl.plan.Distributed.NProcPerNode; n > 1 {
		share = fmt.Sprintf("; %d of the node's %d cores a rank, as %d ranks share it", max(cores/n, 1), cores, n)
		cores = max(cores/n, 1)
	}
	pl.lc = loaderChoice{workersAuto: true, prefetchAuto: true}
	if v, ok := pl.train.Workers.Fixed(); ok {
		ld.Workers, pl.lc.workersAuto = int(v), false
		pl.lc.why = "as written"
	} else {
		switch {
		case cores <= 1:
			ld.Workers, pl.lc.why = 0, "one core: batches load on the training thread"
		case decodingSources[ld.Kind] && pl.dev.Kind == plan.BackendGPU:
			ld.Workers = min(8, cores-1)
			pl.lc.why = fmt.Sprintf("%s source decodes every sample: one worker per core left after the training thread (%d cores), at most 8", article(ld.Kind), cores)
		case decodingSources[ld.Kind]:
			ld.Workers = max(1, cores/4)
			pl.lc.why = fmt.Sprintf("%s source decodes every sample, but the CPU executor trains on the same %d cores: a quarter of them, at least one", article(ld.Kind), cores)
		default:
			ld.Workers = 1
			what := "the source"
			if ld.Kind != "" {
				what = article(ld.Kind) + " source"
			}
			pl.lc.why = what + " is held in memory: one worker copies batches out while the step runs"
		}
	}
	if pl.lc.workersAuto {
		pl.lc.why += share
	}
	if v, ok := pl.train.Prefetch.Fixed(); ok {
		ld.Prefetch, pl.lc.prefetchAuto = int(v), false
	}
	hostAvail := pl.host.MemAvailable
	if pl.traits().LoaderInBudget {
		ld.HostBudget = pl.plan.Memory.Budget
	} else {
		ld.HostBudget = hostAvail / 4
	}
	return ld
}

// cpuSampleBytes is one sample as dataset's batches hold it: the inputs
// and the targets in fp32 (a class index per output position for
// cross_entropy, one value per output element for the other losses), a
// validity mask beside the targets for a raster with a target, and the
// sample's index.
func (pl *planner) cpuSampleBytes(g *stdlib.Graph) int64 {
	out := g.OutShape()
	y := numel(out)
	if l := pl.loss(); l == "cross_entropy" || l == "" {
		y = 1
		if len(out) == 3 {
			y = mul(out[1], out[2])
		}
	}
	if src := pl.source(); src != nil && src.Kind == spec.KindGeoTIFF && src.At.Has("target") {
		y = mul(y, 2)
	}
	return sum(mul(numel(g.Input), 4), mul(y, 4), 8)
}

// loaderBatches is the number of batches the loaders allocate. On a GPU
// host, Workers × Prefetch: PyTorch's DataLoader holds prefetch_factor
// batches per worker. On the CPU backend, dataset's loader fills up to
// Workers × Prefetch batches while the training step holds one and a
// lagged readback another (two in all without workers), and keeps them
// for reuse; with all, the
// evaluation loader's as many again when the file evaluates (an
// evaluate block, or a split to validate on), since the training
// loader's batches outlive each evaluation.
func (pl *planner) loaderBatches(ld plan.Loader, all bool) int64 {
	w := int64(ld.Workers * ld.Prefetch)
	if !pl.traits().LoaderInBudget {
		return w
	}
	// The free list takes back Workers × Prefetch + 2 batches: those in
	// flight, the one training and the one a lagged loss readback still
	// holds; dataset allocates a batch only when it is empty.
	n := w + 2
	if ld.Workers == 0 {
		n = 2
	}
	if all && pl.evaluates() {
		n *= 2
	}
	return n
}

// evaluates says whether a run evaluates the model: at the end on an
// evaluate block's source, or each epoch on the train source's split.
func (pl *planner) evaluates() bool {
	if pl.sp.Evaluate != nil {
		return true
	}
	src := pl.source()
	return src != nil && src.Split != nil
}

// fitLoaderToHost shrinks an automatic prefetch, then automatic workers,
// until a GPU plan's loader buffers fit a quarter of the host's memory.
func (pl *planner) fitLoaderToHost(ld *plan.Loader, b int64) {
	bytes := func() int64 { return mul(mul(int64(ld.Workers*ld.Prefetch), b), ld.SampleBytes) }
	shrunk := false
	defer func() {
		if shrunk {
			pl.lc.why += "; shrunk to fit the host's memory"
		}
	}()
	for bytes() > ld.HostBudget {
		switch {
		case pl.lc.prefetchAuto && ld.Prefetch > 1:
			ld.Prefetch--
		case pl.lc.workersAuto && ld.Workers > 0:
			ld.Workers--
		default:
			pl.warnf(pl.train.At.Written("workers"), "loader-memory", "the loader's buffers exceed the host's memory",
				"%d workers × %d batches × %d samples of %s take %s; the host has %s for them (a quarter of its available memory). Lower workers or prefetch.",
				ld.Workers, ld.Prefetch, b, FormatBytes(ld.SampleBytes), FormatBytes(bytes()), FormatBytes(ld.HostBudget))
			return
		}
		shrunk = true
	}
}

func (pl *planner) loaderDecisions(ld plan.Loader) {
	where := "a quarter of the host's available memory"
	if pl.traits().LoaderInBudget {
		where = "the training budget, which counts them"
	}
	w := "workers as written"
	if pl.lc.workersAuto {
		w = "workers auto: " + pl.lc.why
	}
	pl.decide("workers", fmt.Sprint(ld.Workers), w+".")
	p := fmt.Sprintf("prefetch as written; the buffers take %s of %s (%s).", FormatBytes(ld.BufferBytes), FormatBytes(ld.HostBudget), where)
	if pl.lc.prefetchAuto {
		batches := fmt.Sprintf("%d × %d batches", ld.Workers, ld.Prefetch)
		if pl.traits().LoaderInBudget {
			batches = fmt.Sprintf("%s and the one training, %d in all,", batches, pl.loaderBatches(ld, false))
		}
		p = fmt.Sprintf("prefetch auto: %d batches ahead per worker; %s of %d samples (%s each) take %s of %s (%s).",
			ld.Prefetch, batches, pl.plan.BatchSize, FormatBytes(ld.SampleBytes), FormatBytes(ld.BufferBytes), FormatBytes(ld.HostBudget), where)
	}
	if pl.traits().LoaderInBudget && pl.evaluates() {
		p = strings.TrimSuffix(p, ".") + "; evaluation's loader holds as many again."
	}
	pl.decide("prefetch", fmt.Sprint(ld.Prefetch), p)
}

// article puts "a" or "an" before a word.
func article(w string) string {
	if w != "" && strings.ContainsRune("aeiou", rune(w[0])) {
		return "an " + w
	}
	return "a " + w
}
