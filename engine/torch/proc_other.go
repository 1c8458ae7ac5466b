//go:build !linux

package torch

import (
	osexec "os/exec"
)

func setProcAttr(cmd *osexec.Cmd) {}

func killGroup(cmd *osexec.Cmd) error { return cmd.Process.Kill() }
