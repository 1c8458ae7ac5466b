//go:build linux

package torch

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// region is a file mapped into memory by pipe and by a worker: batches,
// outputs and checkpoint tensors cross between the two through it, never
// through the control pipe. It lives under /dev/shm (memory, not disk)
// when that has room, else in the temporary folder; its pages are
// reserved with fallocate when it is made, so a full /dev/shm is an error
// here rather than a SIGBUS at the first write.
type region struct {
	name string
	path string
	f    *os.File
	data []byte
}

// shmDirs are the folders tried for regions, in order.
var shmDirs = func() []string { return []string{"/dev/shm", os.TempDir()} }

// newRegion makes a region of size bytes (at least one page).
func newRegion(name string, size int) (*region, error) {
	size = max(size, 4096)
	var errs []error
	for _, dir := range shmDirs() {
		r, err := newRegionIn(dir, name, size)
		if err == nil {
			return r, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", dir, err))
	}
	return nil, fmt.Errorf("cannot make %d bytes of shared memory for the torch worker: %w", size, errors.Join(errs...))
}

func newRegionIn(dir, name string, size int) (*region, error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("not a folder")
	}
	f, err := os.CreateTemp(dir, "pipe-torch-"+name+"-*")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*region, error) {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, int64(size)); err != nil {
		if !errors.Is(err, syscall.EOPNOTSUPP) {
			return fail(err)
		}
		if err := f.Truncate(int64(size)); err != nil {
			return fail(err)
		}
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return fail(err)
	}
	return &region{name: name, path: f.Name(), f: f, data: data}, nil
}

// size is the region's size in bytes.
func (r *region) size() int { return len(r.data) }

// floats is count float32 values from byte offset off.
func (r *region) floats(off, count int) []float32 {
	if count == 0 {
		return nil
	}
	if off < 0 || off%4 != 0 || off+4*count > len(r.data) {
		panic(fmt.Sprintf("torch: region %s: %d floats at %d overrun its %d bytes", r.name, count, off, len(r.data)))
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&r.data[off])), count)
}

// unlink removes the file's name once both sides have mapped it: the
// memory stays until both unmap it, and nothing is left behind if either
// side dies.
func (r *region) unlink() {
	if r.path != "" {
		os.Remove(r.path)
		r.path = ""
	}
}

func (r *region) close() {
	if r == nil {
		return
	}
	r.unlink()
	if r.data != nil {
		_ = syscall.Munmap(r.data)
		r.data = nil
	}
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
}
