//go:build !linux

package exec

// ProcessMaxRSS is unknown outside Linux.
func ProcessMaxRSS() int64 { return 0 }
