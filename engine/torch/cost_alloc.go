package torch

import (
	"slices"

	"pipe/planner/cost"
)

// The caching allocator's constants (c10/cuda/CUDACachingAllocator.cpp).
const (
	allocMinBlock      = 512      // every size is rounded up to a multiple of 512 bytes
	allocSmallSize     = 1 << 20  // the largest "small" request
	allocSmallBuffer   = 2 << 20  // small requests share 2 MiB blocks
	allocLargeBuffer   = 20 << 20 // requests of 1 to 10 MiB share 20 MiB segments
	allocMinLargeAlloc = 10 << 20 // from here a request gets its own segment
	allocRoundLarge    = 2 << 20  // rounded up to 2 MiB
)

// allocBlock is the block the caching allocator hands out for a request
// of n bytes (round_size): n rounded up to 512 bytes; 0 for 0.
func allocBlock(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return ceilTo(n, allocMinBlock)
}

// allocSegment is the segment the allocator asks cudaMalloc for when no
// cached block holds a request of n bytes (get_allocation_size).
func allocSegment(n int64) int64 {
	switch {
	case n <= 0:
		return 0
	case n <= allocSmallSize:
		return allocSmallBuffer
	case n < allocMinLargeAlloc:
		return allocLargeBuffer
	}
	return ceilTo(n, allocRoundLarge)
}

func ceilTo(n, unit int64) int64 {
	if n > cost.Sat-unit {
		return cost.Sat
	}
	return (n + unit - 1) / unit * unit
}

// CachingAllocator is PyTorch's CUDA caching allocator as the cost model
// prices it: every tensor rounded up to 512 bytes (what
// max_memory_allocated counts) and held in segments from cudaMalloc (what
// max_memory_reserved counts).
type CachingAllocator struct{}

var _ cost.Allocator = CachingAllocator{}

// Reserve implements cost.Allocator: live tensors of the given sizes
// packed as the allocator packs them: small blocks into 2 MiB blocks,
// blocks of 1 to 10 MiB first-fit (largest first) into 20 MiB segments,
// larger ones into segments of their own.
func (CachingAllocator) Reserve(sizes []int64) (allocated, reserved int64) {
	var small int64
	var mid []int64
	for _, s := range sizes {
		b := allocBlock(s)
		allocated = cost.Add(allocated, b)
		switch {
		case b == 0:
		case b <= allocSmallSize:
			small = cost.Add(small, b)
		case b < allocMinLargeAlloc:
			mid = append(mid, b)
		default:
			reserved = cost.Add(reserved, allocSegment(b))
		}
	}
	reserved = cost.Add(reserved, ceilTo(small, allocSmallBuffer))
	slices.Sort(mid)
	var free []int64 // room left in each 20 MiB segment
	for i := len(mid) - 1; i >= 0; i-- {
		b, placed := mid[i], false
		for k := range free {
			if free[k] >= b {
				free[k] -= b
				placed = true
				break
			}
		}
		if !placed {
			free = append(free, allocLargeBuffer-b)
			reserved = cost.Add(reserved, allocLargeBuffer)
		}
	}
	return allocated, reserved
}
