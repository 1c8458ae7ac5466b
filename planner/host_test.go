package planner

import "testing"

// TestVisibleGPUs: CUDA_VISIBLE_DEVICES picks and orders the GPUs by
// index or UUID prefix, ends at its first entry that names none, and
// hides them all when empty; unset, every GPU nvidia-smi lists is seen.
func TestVisibleGPUs(t *testing.T) {
	gpus := parseNvidiaSMI([]byte("0, GPU-aaaa1111, NVIDIA H100 80GB HBM3, 81559, 81000\n" +
		"1, GPU-bbbb2222, NVIDIA H100 80GB HBM3, 81559, 80000\n2, GPU-cccc3333, NVIDIA H100 80GB HBM3, 81559, 79000\n"))
	if len(gpus) != 3 || gpus[2].Index != 2 || gpus[1].UUID != "GPU-bbbb2222" || gpus[0].MemFree != 81000<<20 {
		t.Fatalf("parsed %+v", gpus)
	}
	indices := func(gs []GPUInfo) []int {
		var out []int
		for _, g := range gs {
			out = append(out, g.Index)
		}
		return out
	}
	for _, c := range []struct {
		v    string
		set  bool
		want []int
	}{
		{"", false, []int{0, 1, 2}},
		{"", true, nil},
		{"2,0", true, []int{2, 0}},
		{"GPU-bbbb", true, []int{1}},
		{"1,7,2", true, []int{1}}, // CUDA stops at the first invalid entry
		{"-1", true, nil},
		{"0,0", true, []int{0}},
	} {
		got := indices(visibleGPUs(gpus, c.v, c.set))
		if len(got) != len(c.want) {
			t.Errorf("CUDA_VISIBLE_DEVICES=%q (set %v): %v, want %v", c.v, c.set, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("CUDA_VISIBLE_DEVICES=%q: %v, want %v", c.v, got, c.want)
				break
			}
		}
	}
}
