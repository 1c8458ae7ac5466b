package torch

import (
	"fmt"
	"syscall"
)

func fmtSscan(s string, v *int) (int, error) { return fmt.Sscan(s, v) }

func killProcess(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }
