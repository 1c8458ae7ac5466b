package planner

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/spec"
)

// HostInfo is what the planner knows of the machine it plans for: memory
// and cores for the CPU backend and the loader, and the GPUs nvidia-smi
// lists. DetectHost measures it; tests and golden plans inject a fixed one
// with WithHost, so nothing in a plan depends on the machine that ran the
// tests.
type HostInfo struct {
	// MemTotal and MemAvailable in bytes, as /proc/meminfo reports them.
	MemTotal     int64
	MemAvailable int64
	Cores        int
	// CPUFLOPS is the host's peak fp32 FLOP/s over all cores and
	// CPUBandwidth its memory bandwidth in bytes per second; 0 means
	// unknown, and the planner assumes CoreFLOPS and CoreBandwidth per
	// core.
	CPUFLOPS     float64
	CPUBandwidth float64
	GPUs         []GPUInfo
	// RSS is the planning process's resident memory when DetectHost ran
	// (VmRSS), less its Go heap: pipe's runtime before any data or model
	// (process.go); 0 when not measured.
	RSS int64
	// CPU is the host's vector extensions, which an engine may choose
	// its kernels by (DetectHost reads them).
	CPU CPUFeatures
	// Engines is what each engine knows of this machine, by engine name
	// (cost.Host): what its descriptor measured (cost.HostProber), which
	// DetectHost does not ask, its callers do; and its library's version
	// where a worker said it or a flag gave it.
	Engines map[string]cost.Host
}

// CPUFeatures is what CPUID says of the host's vector extensions.
type CPUFeatures = cost.CPUFeatures

// GPUInfo is one GPU as nvidia-smi reports it.
type GPUInfo struct {
	// Index is nvidia-smi's number for the GPU, UUID its identifier
	// ("GPU-..."); CUDA_VISIBLE_DEVICES names GPUs by either.
	Index    int
	UUID     string
	Name     string
	MemTotal int64
	MemFree  int64
}

// Assumed per-core figures when the host's are not given: a core with
// 256-bit FMA units near 3 GHz reaches about 50 GFLOP/s in fp32 GEMM, and
// a server's memory channels give each core about 10 GB/s.
const (
	CoreFLOPS     = 50e9
	CoreBandwidth = 10e9
)

// DetectHost measures this machine: memory from /proc/meminfo (falling
// back to 8 GiB where there is none), cores from the Go runtime, and GPUs
// from nvidia-smi when it is on PATH.
func DetectHost() HostInfo {
	h := HostInfo{Cores: runtime.NumCPU(), RSS: processRuntime(), CPU: detectCPU()}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		h.MemTotal, h.MemAvailable = parseMeminfo(f)
		f.Close()
	}
	if h.MemTotal == 0 {
		h.MemTotal = 8 << 30
	}
	if h.MemAvailable == 0 {
		h.MemAvailable = h.MemTotal
	}
	if path, err := exec.LookPath("nvidia-smi"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, path, "--query-gpu=index,uuid,name,memory.total,memory.free",
			"--format=csv,noheader,nounits").Output()
		if err == nil {
			v, set := os.LookupEnv("CUDA_VISIBLE_DEVICES")
			h.GPUs = visibleGPUs(parseNvidiaSMI(out), v, set)
		}
	}
	return h
}

// parseMeminfo reads MemTotal and MemAvailable (in kB) from /proc/meminfo.
func parseMeminfo(r io.Reader) (total, avail int64) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			total = v * 1024
		case "MemAvailable:":
			avail = v * 1024
		}
	}
	return total, avail
}

// parseNvidiaSMI reads the lines of nvidia-smi
// --query-gpu=index,uuid,name,memory.total,memory.free (or name,
// memory.total,memory.free, numbered in order) --format=csv,noheader,nounits
// (memory in MiB).
func parseNvidiaSMI(out []byte) []GPUInfo {
	var gpus []GPUInfo
	for _, line := range bytes.Split(out, []byte("\n")) {
		f := strings.Split(string(line), ",")
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		g := GPUInfo{Index: len(gpus)}
		switch len(f) {
		case 3:
		case 5:
			idx, err := strconv.Atoi(f[0])
			if err != nil {
				continue
			}
			g.Index, g.UUID = idx, f[1]
			f = f[2:]
		default:
			continue
		}
		total, err1 := strconv.ParseInt(f[1], 10, 64)
		free, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		g.Name, g.MemTotal, g.MemFree = f[0], total<<20, free<<20
		gpus = append(gpus, g)
	}
	return gpus
}

// visibleGPUs is the GPUs a CUDA program sees under CUDA_VISIBLE_DEVICES
// (v, when set): the listed ones in the list's order (so cuda:0 is the
// first listed), each an index or a UUID's prefix ("GPU-8f3e"). As in
// CUDA, the list ends at its first entry that names no GPU, and an empty
// one hides them all; nvidia-smi itself ignores the variable.
func visibleGPUs(gpus []GPUInfo, v string, set bool) []GPUInfo {
	if !set {
		return gpus
	}
	var out []GPUInfo
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		k := -1
		for i, g := range gpus {
			if idx, err := strconv.Atoi(e); err == nil && idx == g.Index ||
				e != "" && g.UUID != "" && strings.HasPrefix(g.UUID, e) && !strings.HasPrefix(e, "-") {
				k = i
				break
			}
		}
		if k < 0 || slices.ContainsFunc(out, func(g GPUInfo) bool { return g.Index == gpus[k].Index }) {
			break
		}
		out = append(out, gpus[k])
	}
	return out
}

// cpuDevice is the local CPU as a device.
func (h HostInfo) cpuDevice() plan.Device {
	flops, bw := h.CPUFLOPS, h.CPUBandwidth
	doc := fmt.Sprintf("this machine's CPU: %d cores", h.Cores)
	if flops == 0 || bw == 0 {
		doc += fmt.Sprintf(" (assumed %.0f GFLOP/s and %.0f GB/s per core)", CoreFLOPS/1e9, CoreBandwidth/1e9)
	}
	if flops == 0 {
		flops = float64(max(h.Cores, 1)) * CoreFLOPS
	}
	if bw == 0 {
		bw = float64(max(h.Cores, 1)) * CoreBandwidth
	}
	return plan.Device{Name: "cpu", Kind: plan.BackendCPU, Origin: "local", Doc: doc,
		Memory: h.MemAvailable, Bandwidth: bw, Peaks: spec.Peaks{FP32: flops}, Cores: h.Cores, HostMemory: h.MemTotal, Kernels: h.kernels()}
}

// kernels is the kernels the products run on this CPU as the first
// engine, by name, that knows them says, "" where none does.
func (h HostInfo) kernels() string {
	names := slices.Sorted(maps.Keys(h.Engines))
	for _, n := range names {
		if k := h.Engines[n].Kernels; k != "" {
			return k
		}
	}
	return ""
}

// WithEngineHost is h with what engine name knows of it set to e; h's
// own map is left as it was, so that a shared HostInfo stays unchanged.
func (h HostInfo) WithEngineHost(name string, e cost.Host) HostInfo {
	m := maps.Clone(h.Engines)
	if m == nil {
		m = map[string]cost.Host{}
	}
	m[name] = e
	h.Engines = m
	return h
}
