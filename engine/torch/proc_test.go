package torch

import (
	"fmt"
	"net"
	"syscall"
	"testing"
)

func fmtSscan(s string, v *int) (int, error) { return fmt.Sscan(s, v) }

func killProcess(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }

// TestRendezvousPort: a port asked for is kept; with every rank on this
// machine none asked for is a free one, so two runs do not meet; across
// machines the default is the one the others assume.
func TestRendezvousPort(t *testing.T) {
	if p, err := rendezvousPort(12345, true); err != nil || p != 12345 {
		t.Errorf("asked 12345: %d, %v", p, err)
	}
	if p, err := rendezvousPort(0, false); err != nil || p != 29500 {
		t.Errorf("across machines: %d, %v", p, err)
	}
	p, err := rendezvousPort(0, true)
	if err != nil || p <= 0 {
		t.Fatalf("on one machine: %d, %v", p, err)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		t.Fatalf("port %d is not free: %v", p, err)
	}
	l.Close()
}
