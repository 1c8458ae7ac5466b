//go:build !linux

package torch

import (
	"os"
	osexec "os/exec"
)

func setProcAttr(cmd *osexec.Cmd) {}

// processAlive says yes: without a cheap check, no folder is swept.
func processAlive(pid int) bool { return true }

func killGroup(cmd *osexec.Cmd) error { return cmd.Process.Kill() }

func processStopped(pid int) bool { return false }

// oomKills is unknown here.
func oomKills() int64 { return -1 }

// exitMaxRSS is unknown outside Linux.
func exitMaxRSS(ps *os.ProcessState) int64 { return 0 }

// selfPeak is unknown outside Linux.
func selfPeak() int64 { return 0 }
