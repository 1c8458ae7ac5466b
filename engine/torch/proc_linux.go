package torch

import (
	"bytes"
	"fmt"
	"os"
	osexec "os/exec"
	"syscall"
)

// setProcAttr starts a worker in its own process group, so that the
// terminal's Ctrl-C reaches pipe alone (pipe finishes the step and writes
// a checkpoint before it stops the workers), and has the kernel kill it
// if pipe dies.
func setProcAttr(cmd *osexec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// processAlive reports whether process pid exists (one of another user
// counts: signalling it is refused, not unknown).
func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) != syscall.ESRCH
}

// killGroup kills the worker and whatever it started.
func killGroup(cmd *osexec.Cmd) error {
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return cmd.Process.Kill()
	}
	return nil
}

// processStopped reports whether process pid is stopped (SIGSTOP, a
// debugger): /proc's state T or t.
func processStopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] == 'T' || b[i+2] == 't'
	}
	return false
}
