package stdlib

import "pipe/spec"

// DeviceProfile is what the planner knows about an accelerator: how much
// memory it has, how fast it reads it, and its peak dense arithmetic rate
// in each precision.
//
// Memory is the marketed capacity read as GiB (a "80GB" card is 80·2^30
// bytes). That is what nvidia-smi reports for the A100s (40960 and 81920
// MiB); for the others it is a little more than the card reports (an H100
// 80GB shows 81559 MiB, an H200 143771 MiB, a T4 15360 MiB), which the
// planner's memory margin absorbs. Bandwidth is the vendor's peak memory
// bandwidth in bytes per second (decimal: 2,039 GB/s is 2.039e12). The
// FLOP/s figures are the vendors' published dense rates, without the 2:4
// sparsity doubling; FP32 is the CUDA-core rate, TF32, FP16 and BF16 the
// tensor-core rates with FP32 accumulation (the one training uses; GeForce
// cards run FP16 accumulation at twice that). Zero means the precision is
// not supported. SXM parts are listed where a PCIe variant differs.
type DeviceProfile struct {
	Name string
	// Kind is "gpu" or "cpu".
	Kind string
	Doc  string
	// Memory in bytes.
	Memory int64
	// Bandwidth of memory in bytes per second.
	Bandwidth float64
	// Peaks are the dense FLOP/s per precision, 0 where unsupported;
	// Peak reads one.
	spec.Peaks
	SupportsBF16 bool
	SupportsTF32 bool
	// Cores is the number of CPU cores, for a cpu profile; 0 for a GPU.
	Cores int
	// HostMemory is the memory of the host in bytes, when known.
	HostMemory int64
	// Capability is a GPU's CUDA compute capability ("8.0"), from
	// NVIDIA's CUDA GPUs table; it names the generation (7.x Volta and
	// Turing, 8.0 and 8.6 Ampere, 8.9 Ada, 9.0 Hopper).
	Capability string
	// Link is the bandwidth, in bytes per second each way, by which a GPU
	// reaches the other GPUs of its machine, and LinkName the link: the
	// vendor's NVLink total halved for the SXM parts (NVLink 3 on an A100,
	// 600 GB/s both ways together; NVLink 4 on an H100 or H200, 900 GB/s),
	// the PCIe slot's for the others (Gen4 x16, 64 GB/s both ways).
	Link     float64
	LinkName string
	// L2 is a GPU's L2 cache in bytes, as CUDA's device properties give
	// it (L2CacheSize; the datasheets' "MB" are MiB there): Inductor's
	// autotuning flushes it with a buffer of its size.
	L2 int64
}

const (
	mib = int64(1) << 20
	gib = int64(1) << 30
	tb  = 1e12 // bytes/s and FLOP/s are decimal
)

// devices are the built-in profiles, sorted by name. Sources: NVIDIA's
// A100, H100, H200, L4 and T4 datasheets, the V100 datasheet (SXM2), and
// the Ampere GA102 and Ada AD102 whitepapers for the GeForce cards (whose
// NVLink bridge, on a 3090, joins two cards only: a machine's ring of
// more goes over PCIe, which is the link given). The L2 sizes are the
// A100, H100, Volta, Turing, GA102 and Ada whitepapers' (the H200 is a
// GH100 as the H100 is, the L4 an AD104).
var devices = []*DeviceProfile{
	{Name: "a100-40gb", Kind: "gpu", Capability: "8.0", Doc: "NVIDIA A100 40GB SXM (HBM2)",
		Memory: 40 * gib, Bandwidth: 1.555 * tb,
		Peaks: spec.Peaks{FP32: 19.5 * tb, TF32: 156 * tb, FP16: 312 * tb, BF16: 312 * tb}, SupportsBF16: true, SupportsTF32: true,
		Link: 300e9, LinkName: "NVLink 3", L2: 40 * mib},
	{Name: "a100-80gb", Kind: "gpu", Capability: "8.0", Doc: "NVIDIA A100 80GB SXM (HBM2e)",
		Memory: 80 * gib, Bandwidth: 2.039 * tb,
		Peaks: spec.Peaks{FP32: 19.5 * tb, TF32: 156 * tb, FP16: 312 * tb, BF16: 312 * tb}, SupportsBF16: true, SupportsTF32: true,
		Link: 300e9, LinkName: "NVLink 3", L2: 40 * mib},
	{Name: "h100-80gb", Kind: "gpu", Capability: "9.0", Doc: "NVIDIA H100 80GB SXM5 (HBM3)",
		Memory: 80 * gib, Bandwidth: 3.35 * tb,
		Peaks: spec.Peaks{FP32: 66.9 * tb, TF32: 494.7 * tb, FP16: 989.4 * tb, BF16: 989.4 * tb}, SupportsBF16: true, SupportsTF32: true,
		Link: 450e9, LinkName: "NVLink 4", L2: 50 * mib},
	{Name: "h200-141gb", Kind: "gpu", Capability: "9.0", Doc: "NVIDIA H200 141GB SXM (HBM3e)",
		Memory: 141 * gib, Bandwidth: 4.8 * tb,
		Peaks: spec.Peaks{FP32: 66.9 * tb, TF32: 494.7 * tb, FP16: 989.4 * tb, BF16: 989.4 * tb}, SupportsBF16: true, SupportsTF32: true,
		Link: 450e9, LinkName: "NVLink 4", L2: 50 * mib},
	{Name: "l4-24gb", Kind: "gpu", Capability: "8.9", Doc: "NVIDIA L4 24GB (GDDR6)",
		Memory: 24 * gib, Bandwidth: 0.3 * tb,
		Peaks: spec.Peaks{FP32: 30.3 * tb, TF32: 60 * tb, FP16: 121 * tb, BF16: 121 * tb}, SupportsBF16: true, SupportsTF32: true,
		Link: 32e9, LinkName: "PCIe 4.0 x16", L2: 48 * mib},
	{Name: "rtx3090-24gb", Kind: "gpu", Capability: "8.6", Doc: "NVIDIA GeForce RTX 3090 24GB (GDDR6X)",
		Memory: 24 * gib, Bandwidth: 0.936 * tb,
		Peaks: spec.Peaks{FP32: 35.6 * tb, TF32: 35.6 * tb, FP16: 71 * tb, BF16: 71 * tb}, SupportsBF16: true, SupportsTF32: true,
		Link: 32e9, LinkName: "PCIe 4.0 x16", L2: 6 * mib},
	{Name: "rtx4090-24gb", Kind: "gpu", Capability: "8.9", Doc: "NVIDIA GeForce RTX 4090 24GB (GDDR6X)",
		Memory: 24 * gib, Bandwidth: 1.008 * tb,
		Peaks: spec.Peaks{FP32: 82.6 * tb, TF32: 82.6 * tb, FP16: 165.2 * tb, BF16: 165.2 * tb}, SupportsBF16: true, SupportsTF32: true,
		Link: 32e9, LinkName: "PCIe 4.0 x16", L2: 72 * mib},
	{Name: "t4-16gb", Kind: "gpu", Capability: "7.5", Doc: "NVIDIA T4 16GB (GDDR6); no TF32 or BF16",
		Memory: 16 * gib, Bandwidth: 0.32 * tb,
		Peaks: spec.Peaks{FP32: 8.1 * tb, FP16: 65 * tb},
		Link:  16e9, LinkName: "PCIe 3.0 x16", L2: 4 * mib},
	{Name: "v100-16gb", Kind: "gpu", Capability: "7.0", Doc: "NVIDIA V100 16GB SXM2 (HBM2); no TF32 or BF16",
		Memory: 16 * gib, Bandwidth: 0.9 * tb,
		Peaks: spec.Peaks{FP32: 15.7 * tb, FP16: 125 * tb},
		Link:  150e9, LinkName: "NVLink 2", L2: 6 * mib},
	{Name: "v100-32gb", Kind: "gpu", Capability: "7.0", Doc: "NVIDIA V100 32GB SXM2 (HBM2); no TF32 or BF16",
		Memory: 32 * gib, Bandwidth: 0.9 * tb,
		Peaks: spec.Peaks{FP32: 15.7 * tb, FP16: 125 * tb},
		Link:  150e9, LinkName: "NVLink 2", L2: 6 * mib},
}

// Devices returns the built-in GPU profiles, sorted by name. The "cpu"
// profile is not among them: the planner measures the host at run time.
// The profiles are shared; copy one before changing it.
func Devices() []*DeviceProfile { return devices }

// Device returns the built-in profile with the given name, or nil.
func Device(name string) *DeviceProfile {
	for _, d := range devices {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// deviceNames lists the names a device field accepts without a user
// device block: the profiles, "auto" and "cpu".
func deviceNames() []string {
	out := []string{"auto", "cpu"}
	for _, d := range devices {
		out = append(out, d.Name)
	}
	return out
}
