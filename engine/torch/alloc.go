package torch

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// TCMalloc names the allocator CPUAllocator picks where it can.
const TCMalloc = "tcmalloc"

// tcmallocLib is gperftools' tcmalloc without its profilers (Debian's
// libtcmalloc-minimal4), and tcmallocDirs where Linux distributions put it.
const tcmallocLib = "libtcmalloc_minimal.so.4"

var tcmallocDirs = []string{"/usr/lib/*-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"}

// CPUAllocator is the malloc a torch worker on the CPU runs with, and
// the library preloaded for it: tcmalloc where its library is present
// and LD_PRELOAD is unset, else the C library's ("", ""). glibc keeps
// freed tensors' pages (its mmap threshold rises to the largest block
// freed), so a worker's peak grows past its step's by up to a third;
// tcmalloc reuses them. Details: docs/design/torch-cpu-allocator.md.
func CPUAllocator() (name, lib string) {
	if runtime.GOOS != "linux" || os.Getenv("LD_PRELOAD") != "" {
		return "", ""
	}
	for _, dir := range tcmallocDirs {
		found, _ := filepath.Glob(filepath.Join(dir, tcmallocLib))
		if len(found) > 0 {
			return TCMalloc, found[0]
		}
	}
	return "", ""
}

// allocatorEnv is env with LD_PRELOAD naming the CPU allocator's library
// for a worker on device dev ("" is the CPU), where there is one; a
// worker on a GPU keeps the C library's malloc.
func allocatorEnv(env []string, dev string) []string {
	if strings.HasPrefix(dev, "cuda") || slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "LD_PRELOAD=") }) {
		return env
	}
	if _, lib := CPUAllocator(); lib != "" {
		return append(env, "LD_PRELOAD="+lib)
	}
	return env
}

// FakeNoOneDNN is the test hook that turns oneDNN off in the workers on
// the CPU ("1"): every conv then takes PyTorch's slow path, as a bf16
// conv does on a CPU without AVX-512, and the planner prices that path
// (OneDNNOff). It lets an AVX-512 machine check the price of the path an
// AVX2-only one takes.
const FakeNoOneDNN = "PIPE_TORCH_FAKE_NO_ONEDNN"

// OneDNNMaxISA is the cap on oneDNN's kernels the workers this process
// starts run with: ONEDNN_MAX_CPU_ISA, else DNNL_MAX_CPU_ISA, lowercased
// as oneDNN reads them (getenv_string_user, src/common/utils.cpp), ""
// where neither is set. The workers inherit this process's environment.
func OneDNNMaxISA() string {
	for _, k := range []string{"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"} {
		if v := os.Getenv(k); v != "" {
			return strings.ToLower(v)
		}
	}
	return ""
}

// OneDNNOff says the workers this process starts on the CPU run with
// oneDNN turned off (FakeNoOneDNN).
func OneDNNOff() bool { return os.Getenv(FakeNoOneDNN) == "1" }
