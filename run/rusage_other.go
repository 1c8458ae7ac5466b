//go:build !linux

package run

// ProcessMaxRSS is unknown outside Linux.
func ProcessMaxRSS() int64 { return 0 }
