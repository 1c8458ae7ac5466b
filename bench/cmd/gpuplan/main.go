// Command gpuplan holds today's GPU memory plan to what a GPU measured,
// with no GPU: it reads the JSONs make gpu-smoke wrote (bench/gpu/*.json),
// plans each of their rows again for the row's device profile, example,
// batch and torch with the planner of this tree, and prints, per row, the
// plan's reserved memory against max_memory_reserved, its allocated
// memory against max_memory_allocated and its total against the device's
// used memory, with the errors. docs/design/gpu-memory-h100.md keeps the
// table it printed before and after each change to the memory terms.
//
//	go run ./bench/cmd/gpuplan [-markdown] [-terms] [-root .] [bench/gpu/nvidia-h100-80gb-hbm3.json ...]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"pipe/engine/costs"
	"pipe/lang"
	"pipe/planner"
	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/stdlib"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// measured is one gpucheck row of a smoke JSON, the fields compared.
type measured struct {
	Example      string `json:"example"`
	Batch        int64  `json:"batch"`
	Steps        int64  `json:"steps"`
	MaxReserved  int64  `json:"max_reserved_bytes"`
	MaxAllocated int64  `json:"max_allocated_bytes"`
	DeviceUsed   int64  `json:"device_used_bytes"`
	Error        string `json:"error"`
	// CUDAGraph and Applied say whether the steps replayed a CUDA graph:
	// gpucheck's cuda_graph, else the worker's applied cuda_graph; a row
	// with neither predates graphs and ran eagerly.
	CUDAGraph bool              `json:"cuda_graph"`
	Applied   map[string]string `json:"applied"`
}

// graphOff is why row m ran without a CUDA graph, "" where it replayed
// one: the plan of the row is priced so (cost.Host.GraphsOff).
func (m measured) graphOff() string {
	a, ok := m.Applied["cuda_graph"]
	switch {
	case m.CUDAGraph || strings.HasPrefix(a, "captured"):
		return ""
	case ok:
		return fmt.Sprintf("the measured row ran without a CUDA graph (applied: %s)", a)
	}
	return "the measured row ran without a CUDA graph (it records none)"
}

// smoke is what gpuplan reads of a make gpu-smoke JSON.
type smoke struct {
	Environment struct {
		GPU   string `json:"gpu"`
		Torch string `json:"torch"`
	} `json:"environment"`
	GPUCheck []measured `json:"gpucheck"`
	// GraphOff is make gpu-smoke's row of fashion_mlp with its planned
	// graph kept off (PIPE_TORCH_GRAPH=off).
	GraphOff []measured `json:"gpucheck_graph_off"`
	ResNet50 struct {
		Pipe measured `json:"pipe"`
	} `json:"resnet50"`
}

// Row is one comparison: the plan's figures beside the device's.
type Row struct {
	File, Example               string
	Batch                       int64
	PlanReserved, MaxReserved   int64
	PlanAllocated, MaxAllocated int64
	PlanTotal, DeviceUsed       int64
	PeakPhase, Err              string
	// Graph says the row replayed a CUDA graph, and PlanGraph that its
	// plan prices one.
	Graph, PlanGraph bool
	// Terms is the plan's memory terms, for -terms.
	Terms []plan.MemoryTerm
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gpuplan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	md := fs.Bool("markdown", false, "print a Markdown table")
	terms := fs.Bool("terms", false, "also print each plan's memory terms")
	root := fs.String("root", ".", "the repository's root, where examples/ and bench/gpu/ are")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	files := fs.Args()
	if len(files) == 0 {
		files, _ = filepath.Glob(filepath.Join(*root, "bench", "gpu", "*.json"))
	}
	var rows []Row
	for _, f := range files {
		rs, err := compare(f, *root)
		if err != nil {
			fmt.Fprintln(stderr, "gpuplan:", err)
			return 1
		}
		rows = append(rows, rs...)
	}
	write(stdout, rows, *md)
	if *terms {
		writeTerms(stdout, rows)
	}
	return 0
}

// compare plans every row of one smoke JSON, the examples read under root.
func compare(path, root string) ([]Row, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s smoke
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dev := profileOf(s.Environment.GPU)
	if dev == "" {
		return nil, fmt.Errorf("%s: no built-in profile for the GPU %q", path, s.Environment.GPU)
	}
	ms := append(s.GPUCheck, s.GraphOff...)
	if s.ResNet50.Pipe.Example != "" {
		ms = append(ms, s.ResNet50.Pipe)
	}
	var rows []Row
	for _, m := range ms {
		if m.Error != "" || m.MaxReserved == 0 {
			continue
		}
		src := filepath.Join(root, "examples", m.Example+".pipe")
		if _, err := os.Stat(src); err != nil {
			src = filepath.Join(root, "bench", "gpu", m.Example+".pipe")
		}
		r := Row{File: filepath.Base(path), Example: m.Example, Batch: m.Batch, Graph: m.graphOff() == "", MaxReserved: m.MaxReserved, MaxAllocated: m.MaxAllocated, DeviceUsed: m.DeviceUsed}
		p, err := planFor(src, dev, s.Environment.Torch, m.Batch, m.Steps, m.graphOff())
		if err != nil {
			r.Err = err.Error()
		} else {
			r.PlanTotal, r.PeakPhase, r.Terms, r.PlanGraph = p.Memory.Total, p.Memory.PeakPhase, p.Memory.Terms, p.Engine.CUDAGraph
			for _, ph := range p.Memory.Phases {
				if ph.Name == p.Memory.PeakPhase {
					r.PlanReserved, r.PlanAllocated = ph.Reserved, ph.Allocated
				}
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// profileOf is the built-in profile of a GPU's name as torch gives it.
func profileOf(gpu string) string {
	n := strings.ToLower(gpu)
	for _, d := range stdlib.Devices() {
		k := strings.SplitN(d.Name, "-", 2)
		if len(k) == 2 && strings.Contains(n, k[0]) && strings.Contains(strings.ReplaceAll(n, " ", ""), k[1]) {
			return d.Name
		}
	}
	return ""
}

// planFor plans src for the torch engine on the device profile dev, with
// the worker's torch given, at the batch given, and with CUDA graphs kept
// off for the reason graphOff ("" where the run replayed one). gpucheck
// trains steps full batches and no partial one, so the plan's training
// set is that (no eager last batch beside a graph).
func planFor(src, dev, torchVersion string, batch, steps int64, graphOff string) (*plan.Plan, error) {
	text, err := os.ReadFile(src)
	if err != nil {
		return nil, err
	}
	f, ds := lang.Parse(src, text)
	prog, cds := lang.Check(f, stdlib.Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		return nil, fmt.Errorf("%s: %w", src, ds)
	}
	dec, dds := stdlib.Decode(prog)
	if dds.HasErrors() {
		return nil, fmt.Errorf("%s: %w", src, dds)
	}
	host := planner.HostInfo{}.WithEngineHost(plan.EngineTorch, cost.Host{Version: strings.SplitN(torchVersion, "+", 2)[0], GraphsOff: graphOff})
	p, pds := planner.Plan(dec, planner.WithCosts(costs.Engines()...), planner.WithDevice(dev), planner.WithEngine(plan.EngineTorch),
		planner.WithBatch(batch), planner.WithHost(host), planner.WithSource(text), planner.WithTrainSamples(max(steps, 1)*batch, true))
	if p == nil || pds.HasErrors() {
		return nil, fmt.Errorf("%s: %w", src, pds)
	}
	return p, nil
}

func errPct(plan, measured int64) string {
	if measured <= 0 || plan <= 0 {
		return "?"
	}
	return fmt.Sprintf("%+.1f%%", 100*float64(plan-measured)/float64(measured))
}

func mib(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

// write prints the rows as a table, in Markdown with md.
func write(w io.Writer, rows []Row, md bool) {
	head := []string{"run", "example", "batch", "peak", "plan rsv", "max rsv", "err", "plan alloc", "max alloc", "err", "plan total", "used", "err"}
	line := func(cells []string) {
		if md {
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
			return
		}
		fmt.Fprintf(w, "%-38s %-12s %5s %-9s %9s %9s %7s %10s %9s %7s %10s %9s %7s\n", toAny(cells)...)
	}
	line(head)
	if md {
		fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(head)))
	}
	for _, r := range rows {
		if r.Err != "" {
			line([]string{r.File, r.Example, fmt.Sprint(r.Batch), "failed: " + strings.SplitN(r.Err, "\n", 2)[0], "", "", "", "", "", "", "", "", ""})
			continue
		}
		line([]string{r.File, r.Example, fmt.Sprint(r.Batch), r.PeakPhase,
			mib(r.PlanReserved), mib(r.MaxReserved), errPct(r.PlanReserved, r.MaxReserved),
			mib(r.PlanAllocated), mib(r.MaxAllocated), errPct(r.PlanAllocated, r.MaxAllocated),
			mib(r.PlanTotal), mib(r.DeviceUsed), errPct(r.PlanTotal, r.DeviceUsed)})
	}
	if !md {
		fmt.Fprintln(w, "\nMiB; plan rsv / alloc: the plan's peak phase, reserved and allocated; max rsv / alloc: max_memory_reserved and")
		fmt.Fprintln(w, "max_memory_allocated as measured; plan total (the context included) against mem_get_info's used memory.")
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// writeTerms prints each distinct example's terms once.
func writeTerms(w io.Writer, rows []Row) {
	seen := map[string]bool{}
	for _, r := range rows {
		k := fmt.Sprint(r.Example, r.Batch)
		if seen[k] || r.Err != "" {
			continue
		}
		seen[k] = true
		fmt.Fprintf(w, "\n%s, batch %d:\n", r.Example, r.Batch)
		for _, t := range r.Terms {
			fmt.Fprintf(w, "  %-36s %10s MiB  %-28s %s\n", t.Name, mib(t.Bytes), strings.Join(t.Phases, ","), t.Basis)
		}
	}
}
