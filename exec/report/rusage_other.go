//go:build !linux

package report

// maxRSS is unknown outside Linux.
func maxRSS() int64 { return 0 }
