package torch

import (
	"bytes"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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

// oomKills is how many processes of pipe's memory cgroup (and the
// cgroups under it, where its workers are) the kernel's OOM killer has
// killed: the oom_kill line of cgroup v1's memory.oom_control or v2's
// memory.events; -1 when neither can be read. A container that sees its
// cgroup's path but mounts its own cgroup as the root is read at the root.
func oomKills() int64 {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return -1
	}
	var files []string
	for _, l := range strings.Split(string(b), "\n") {
		// "ID:CONTROLLERS:PATH"; v2's one line is "0::PATH".
		f := strings.SplitN(l, ":", 3)
		switch {
		case len(f) < 3:
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			files = append(files, filepath.Join("/sys/fs/cgroup/memory", f[2], "memory.oom_control"), "/sys/fs/cgroup/memory/memory.oom_control")
		case f[0] == "0" && f[1] == "":
			files = append(files, filepath.Join("/sys/fs/cgroup", f[2], "memory.events"), "/sys/fs/cgroup/memory.events")
		}
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
				if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
					return n
				}
			}
		}
	}
	return -1
}

// exitMaxRSS is the peak resident memory of an exited process, as the
// kernel accounted for it when the process was reaped (wait4's rusage, in
// KiB on Linux); 0 when unknown. Linux starts a process's figure, at its
// exec, at the peak of the address space it replaced: a worker's is
// pipe's own until the worker outgrows it (see selfPeak).
func exitMaxRSS(ps *os.ProcessState) int64 {
	if ps == nil {
		return 0
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10
	}
	return 0
}

// selfPeak is this process's peak resident memory (VmHWM), 0 when
// unknown. Read after a worker's exec, it bounds what the worker's
// exitMaxRSS carries over from pipe.
func selfPeak() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscan(rest, &kb); err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
