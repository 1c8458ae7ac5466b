//go:build !linux

package torch

import (
	osexec "os/exec"
)

func setProcAttr(cmd *osexec.Cmd) {}

// processAlive says yes: without a cheap check, no folder is swept.
func processAlive(pid int) bool { return true }

func killGroup(cmd *osexec.Cmd) error { return cmd.Process.Kill() }

func processStopped(pid int) bool { return false }

// oomKills is unknown here.
func oomKills() int64 { return -1 }
