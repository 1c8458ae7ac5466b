package torch

import "testing"

// The caching allocator's rules, checked by hand against
// c10/cuda/CUDACachingAllocator.cpp's round_size and get_allocation_size.
func TestAllocatorRounding(t *testing.T) {
	const mib = 1 << 20
	blocks := []struct{ n, want int64 }{
		{0, 0}, {1, 512}, {511, 512}, {512, 512}, {513, 1024}, {4000, 4096}, {mib + 1, mib + 512},
	}
	for _, c := range blocks {
		if got := allocBlock(c.n); got != c.want {
			t.Errorf("allocBlock(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	segments := []struct{ n, want int64 }{
		{512, 2 * mib},        // small: a 2 MiB block
		{mib, 2 * mib},        // 1 MiB is still small
		{mib + 512, 20 * mib}, // 1 to 10 MiB: a 20 MiB segment
		{10*mib - 512, 20 * mib},
		{10 * mib, 10 * mib}, // from 10 MiB: its own, rounded to 2 MiB
		{10*mib + 512, 12 * mib},
		{33 * mib, 34 * mib},
	}
	for _, c := range segments {
		if got := allocSegment(c.n); got != c.want {
			t.Errorf("allocSegment(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	// Three 8 MiB tensors: two share a 20 MiB segment, the third needs
	// another. A thousand 1 KiB tensors fit one 2 MiB block. A 11 MiB
	// tensor takes 12 MiB.
	sizes := []int64{8 * mib, 8 * mib, 8 * mib, 11 * mib}
	for range 1000 {
		sizes = append(sizes, 1000)
	}
	alloc, res := CachingAllocator{}.Reserve(sizes)
	if want := int64(35*mib + 1000*1024); alloc != want {
		t.Errorf("allocated %d, want %d", alloc, want)
	}
	if want := int64(40*mib + 2*mib + 12*mib); res != want {
		t.Errorf("reserved %d, want %d", res, want)
	}
}
