// Package hostcpu names this machine's processor from /proc/cpuinfo, for
// the tables that must say which CPU they ran on and the caches keyed by
// it (the BLAS kernels' choice, the step-time forecast). It imports only
// the standard library, so that an engine may use it.
package hostcpu

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// Name is the processor's model name as /proc/cpuinfo gives it, with the
// number of CPUs Go sees: "AMD EPYC (2 CPUs)"; the OS and architecture
// where there is no /proc/cpuinfo.
func Name() string {
	for _, kv := range fields() {
		if kv[0] == "model name" {
			return fmt.Sprintf("%s (%d CPUs)", kv[1], runtime.NumCPU())
		}
	}
	return fmt.Sprintf("%s/%s (%d CPUs)", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
}

// Identity is the first processor's vendor, family, model and name lines
// and the number of CPUs: what tells one kind of machine from another,
// for a cache's key.
func Identity() string {
	var out []string
	seen := map[string]bool{}
	for _, kv := range fields() {
		switch kv[0] {
		case "vendor_id", "cpu family", "model", "model name":
			if !seen[kv[0]] {
				seen[kv[0]] = true
				out = append(out, kv[0]+": "+kv[1])
			}
		}
	}
	return strings.Join(append(out, fmt.Sprintf("%d cpus", runtime.NumCPU())), "\n")
}

// fields are /proc/cpuinfo's key-value lines, trimmed; none where it
// cannot be read.
func fields() [][2]string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return nil
	}
	var out [][2]string
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			out = append(out, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	return out
}
