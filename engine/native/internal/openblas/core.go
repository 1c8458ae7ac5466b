package openblas

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/cpu"

	"pipe/internal/hostcpu"
)

// Environment variables the choice reads. CoreEnv is OpenBLAS's own: a
// user who sets it keeps it. AsLibraryEnv=1 is a test hook that makes
// CoreEnv count as the library's own choice, so that a fallback core can
// be simulated on any CPU (OPENBLAS_CORETYPE=Prescott). ChoseEnv is set
// by pipe for its children (the torch engine's workers, a launcher's
// ranks) beside CoreEnv, so that they run and report the same kernels.
const (
	CoreEnv      = "OPENBLAS_CORETYPE"
	AsLibraryEnv = "PIPE_OPENBLAS_AS_LIBRARY"
	ChoseEnv     = "PIPE_OPENBLAS_CHOSE"
)

// Who chose the kernels (Kernels.Source).
const (
	ByLibrary = "library"
	ByUser    = "OPENBLAS_CORETYPE"
	ByPipe    = "pipe"
)

// Kernels says which OpenBLAS kernels this process runs, their vector
// extension, and who chose them and why: OpenBLAS itself from the CPU,
// the user through OPENBLAS_CORETYPE, or pipe, where the library fell
// back to a core below what the CPU runs (docs/design/blas-kernels.md).
type Kernels struct {
	Library string `json:"library"`
	Core    string `json:"core"`
	ISA     string `json:"isa"`
	// Own is the core the library chose itself, where pipe changed it.
	Own    string `json:"library_core,omitempty"`
	Source string `json:"source"`
	Reason string `json:"reason"`
	// Tried is each core pipe measured, when it chose.
	Tried []Trial `json:"tried,omitempty"`
}

// Trial is one core's one-thread SGEMM rate, measured by the clock, and
// whether its product passed the reference check.
type Trial struct {
	Core   string  `json:"core"`
	GFLOPS float64 `json:"gflops"`
	OK     bool    `json:"ok"`
}

// String is the one line the plan, the report and pipe devices print.
func (k Kernels) String() string {
	s := fmt.Sprintf("%s, %s kernels (%s)", k.Library, k.Core, k.ISA)
	switch k.Source {
	case ByUser:
		s += ", as OPENBLAS_CORETYPE sets"
	case ByPipe:
		s += ", " + k.Reason
	}
	return s
}

var (
	chooseOnce sync.Once
	chosen     Kernels
)

// Choose settles the kernels once per process, before the first product,
// and returns them. Where the library runs a core below the CPU's vector
// extensions and the user set no OPENBLAS_CORETYPE, it measures the
// cores the CPU can run (a reference product for correctness, a timed
// one for speed; about 0.1 s, cached per machine and library under the
// user's cache folder) and switches to the fastest correct one.
func Choose() Kernels {
	chooseOnce.Do(func() { chosen = choose(os.Getenv, cacheFile()) })
	return chosen
}

// Levels of vector extensions, in order.
const (
	isaUnknown = iota
	isaSSE
	isaAVX
	isaAVX2
	isaAVX512
)

var isaNames = [...]string{"unknown ISA", "SSE", "AVX", "AVX2", "AVX-512"}

// coreISA is the vector extension each OpenBLAS x86-64 core's SGEMM
// kernels use (OpenBLAS's kernel/x86_64/KERNEL.<core> files).
var coreISA = map[string]int{
	"katmai": isaSSE, "coppermine": isaSSE, "northwood": isaSSE, "banias": isaSSE, "athlon": isaSSE,
	"prescott": isaSSE, "core2": isaSSE, "penryn": isaSSE, "dunnington": isaSSE, "nehalem": isaSSE,
	"atom": isaSSE, "nano": isaSSE, "opteron": isaSSE, "opteron_sse3": isaSSE, "barcelona": isaSSE, "bobcat": isaSSE,
	"sandybridge": isaAVX, "bulldozer": isaAVX, "piledriver": isaAVX, "steamroller": isaAVX, "excavator": isaAVX,
	"haswell": isaAVX2, "zen": isaAVX2,
	"skylakex": isaAVX512, "cooperlake": isaAVX512, "sapphirerapids": isaAVX512,
}

func isaOf(core string) int { return coreISA[strings.ToLower(core)] }

// hostISA is the widest vector extension this CPU and its OS run, as Go
// reads CPUID and XCR0 (GODEBUG=cpu.avx512f=off lowers it, as for Go's
// own kernels).
func hostISA() int {
	x := cpu.X86
	switch {
	case x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512DQ && x.HasAVX512CD:
		return isaAVX512
	case x.HasAVX2 && x.HasFMA:
		return isaAVX2
	case x.HasAVX:
		return isaAVX
	}
	return isaSSE
}

// candidates are the cores worth measuring on a CPU of level isa with
// library lib: each family's kernels at that level and below, down to
// AVX (Cooperlake's came in OpenBLAS 0.3.11).
func candidates(isa int, lib string) []string {
	var out []string
	if isa >= isaAVX512 {
		out = append(out, "SkylakeX")
		if cpu.X86.HasAVX512BF16 && atLeast(lib, 0, 3, 11) {
			out = append(out, "Cooperlake")
		}
	}
	if isa >= isaAVX2 {
		out = append(out, "Haswell", "Zen")
	}
	if isa >= isaAVX {
		out = append(out, "Sandybridge")
	}
	return out
}

// choose is Choose with its inputs given: the environment and the cache
// file ("" for none).
func choose(getenv func(string) string, cache string) Kernels {
	cfg := Config()
	own := CoreName()
	k := Kernels{Library: library(cfg), Core: own, ISA: isaNames[isaOf(own)], Source: ByLibrary,
		Reason: "the library's own choice for this CPU"}
	env := getenv(CoreEnv)
	switch {
	case env != "" && getenv(ChoseEnv) == env:
		k.Source, k.Reason = ByPipe, "chosen by pipe over the library's fallback (inherited from the process that started this one)"
		return k
	case env != "" && getenv(AsLibraryEnv) != "1":
		k.Source, k.Reason = ByUser, "set in the environment, kept"
		return k
	case !strings.Contains(cfg, "DYNAMIC_ARCH"):
		k.Reason = "the library is built for one core"
		return k
	}
	host := hostISA()
	if isaOf(own) == isaUnknown || isaOf(own) >= host {
		return k
	}
	key := cacheKey(cfg, own, host)
	if c, ok := readCache(cache, key); ok && useCore(c.Core) && strings.EqualFold(CoreName(), c.Core) {
		c.Reason += " (cached)"
		return export(c)
	}
	c := measure(k, host)
	if c.Core != own {
		writeCache(cache, key, c)
	}
	return export(c)
}

// export gives the process's children the kernels this one runs (see
// ChoseEnv) and returns k.
func export(k Kernels) Kernels {
	if k.Source == ByPipe {
		os.Setenv(CoreEnv, k.Core)
		os.Setenv(ChoseEnv, k.Core)
	}
	return k
}

// measure times each candidate core and the library's own on a
// one-thread 384³ SGEMM (best of 3 calls in each of 3 interleaved
// rounds, by the clock), checks each one's product against float64, and
// switches to the fastest correct core.
func measure(k Kernels, host int) Kernels {
	own := k.Core
	restore := Threads()
	SetThreads(1)
	defer SetThreads(restore)
	cores := []string{own}
	for _, c := range candidates(host, k.Library) {
		if !strings.EqualFold(c, own) {
			cores = append(cores, c)
		}
	}
	const n = 384
	a, b, c := randMatrix(n*n, 1), randMatrix(n*n, 2), make([]float32, n*n)
	best := make([]float64, len(cores))
	ok := make([]bool, len(cores))
	for round := 0; round < 3; round++ {
		for i, core := range cores {
			if !useCore(core) || !strings.EqualFold(CoreName(), core) {
				continue
			}
			if round == 0 {
				ok[i] = productHolds()
			}
			sgemm(n, n, n, a, b, c) // warm: packing buffers, pages
			for r := 0; r < 3; r++ {
				t0 := time.Now()
				sgemm(n, n, n, a, b, c)
				best[i] = max(best[i], 2*n*n*n/time.Since(t0).Seconds()/1e9)
			}
		}
	}
	pick := 0
	for i := range cores {
		k.Tried = append(k.Tried, Trial{Core: cores[i], GFLOPS: math.Round(best[i]*10) / 10, OK: ok[i]})
		if ok[i] && best[i] > best[pick] {
			pick = i
		}
	}
	useCore(cores[pick])
	if pick == 0 || !ok[pick] {
		useCore(own)
		k.Reason = "the library's own choice; no other core was faster and correct"
		return k
	}
	k.Own, k.Core, k.ISA, k.Source = own, CoreName(), isaNames[isaOf(cores[pick])], ByPipe
	k.Reason = fmt.Sprintf("chosen by pipe over the library's %s (%s) fallback on this %s CPU: %.0f against %.0f GFLOP/s, one-thread SGEMM %d³",
		own, isaNames[isaOf(own)], isaNames[host], best[pick], best[0], n)
	return k
}

// productHolds checks the current kernels' product of odd-sized random
// matrices (edge tiles included) against float64: every element within
// γ_k·(|A||B|)ij, γ_k = k·u/(1−k·u) with u = 2⁻²⁴, the bound any order
// of float32 sums and products meets (Higham, Accuracy and Stability of
// Numerical Algorithms, §3.5).
func productHolds() bool {
	const m, n, k = 67, 73, 129
	a, b, c := randMatrix(m*k, 3), randMatrix(k*n, 4), make([]float32, m*n)
	sgemm(m, n, k, a, b, c)
	return withinBound(m, n, k, a, b, c)
}

// withinBound is productHolds' check of c = a·b.
func withinBound(m, n, k int, a, b, c []float32) bool {
	u := math.Ldexp(1, -24)
	kf := float64(k)
	gamma := kf * u / (1 - kf*u)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var ref, abs float64
			for p := 0; p < k; p++ {
				x, y := float64(a[i*k+p]), float64(b[p*n+j])
				ref += x * y
				abs += math.Abs(x * y)
			}
			got := float64(c[i*n+j])
			if math.IsNaN(got) || math.Abs(got-ref) > gamma*abs {
				return false
			}
		}
	}
	return true
}

// randMatrix is n floats uniform in [-1, 1), the same for a seed.
func randMatrix(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.Float64()*2 - 1)
	}
	return out
}

// library is "OpenBLAS 0.3.21" from the build configuration.
func library(cfg string) string {
	f := strings.Fields(cfg)
	if len(f) >= 2 && f[0] == "OpenBLAS" {
		return f[0] + " " + f[1]
	}
	return "OpenBLAS"
}

// atLeast says the library ("OpenBLAS 0.3.21") is version maj.min.patch
// or later.
func atLeast(lib string, maj, min, patch int) bool {
	var v [3]int
	fmt.Sscanf(strings.TrimPrefix(lib, "OpenBLAS "), "%d.%d.%d", &v[0], &v[1], &v[2])
	return slices.Compare(v[:], []int{maj, min, patch}) >= 0
}

// cacheFile is where choices are kept: the user's cache folder, "" where
// there is none.
func cacheFile() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "pipe", "openblas-cores.json")
}

// cacheKey names a machine and a library: the CPU's model line, its
// vector extensions as Go reads them, the library's configuration and
// its own choice.
func cacheKey(cfg, own string, host int) string {
	h := sha256.Sum256([]byte(strings.Join([]string{hostcpu.Identity(), isaNames[host], cfg, own}, "\n")))
	return hex.EncodeToString(h[:8])
}

func readCache(path, key string) (Kernels, bool) {
	if path == "" {
		return Kernels{}, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Kernels{}, false
	}
	var m map[string]Kernels
	if json.Unmarshal(b, &m) != nil {
		return Kernels{}, false
	}
	k, ok := m[key]
	return k, ok && k.Source == ByPipe && isaOf(k.Core) != isaUnknown
}

// writeCache adds key's choice to the cache, atomically (a temporary
// file renamed over it); a cache that cannot be written is skipped: the
// next process measures again.
func writeCache(path, key string, k Kernels) {
	if path == "" {
		return
	}
	m := map[string]Kernels{}
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	m[key] = k
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil || os.MkdirAll(filepath.Dir(path), 0o755) != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".openblas-cores-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), path) != nil {
		os.Remove(tmp.Name())
	}
}
