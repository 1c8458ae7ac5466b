package run

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ProcessMaxRSS is the process's peak resident set size in bytes, as the
// kernel keeps it for the process's own address space: VmHWM in
// /proc/self/status. getrusage's ru_maxrss is the fallback; it is not
// the first choice because Linux carries into it, across exec, the peak
// of the address space the process was started from (with vfork, its
// parent's), so a run started by a large process reports that process's
// peak.
func ProcessMaxRSS() int64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && kb > 0 {
						return kb << 10
					}
				}
			}
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024
}
