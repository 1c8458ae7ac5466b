package planner

import (
	"syscall"
	"unsafe"
)

// osTiles says whether Linux lets a process use AMX's tile data
// (XFEATURE_XTILEDATA, bit 18 of the features arch_prctl's
// ARCH_GET_XCOMP_SUPP reports, Linux 5.16 and later). A process must
// still ask for it (ARCH_REQ_XCOMP_PERM), which oneDNN does before its
// first AMX kernel (amx::is_available, cpu_isa_traits.cpp); pipe only
// reads.
func osTiles() bool {
	const archGetXcompSupp = 0x1021
	const xtiledata = 1 << 18
	var mask uint64
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archGetXcompSupp, uintptr(unsafe.Pointer(&mask)), 0)
	return errno == 0 && mask&xtiledata != 0
}
