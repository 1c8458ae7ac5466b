//go:build !linux

package torch

import "errors"

type region struct {
	name, path string
	data       []byte
}

func newRegion(name string, size int) (*region, error) {
	return nil, errors.New("the torch engine's shared memory needs Linux")
}

func (r *region) size() int                       { return 0 }
func (r *region) floats(off, count int) []float32 { return nil }
func (r *region) unlink()                         {}
func (r *region) close()                          {}
