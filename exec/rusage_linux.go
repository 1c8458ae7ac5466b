package exec

import "syscall"

// ProcessMaxRSS is the process's peak resident set size in bytes (Linux reports
// it in KiB).
func ProcessMaxRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024
}
