package spec

// Peaks are a device's peak dense arithmetic rates in FLOP/s, one a
// precision, 0 where the precision is not supported: what a device
// block's fp32, tf32, fp16 and bf16 fields give, and what a built-in
// profile (stdlib.DeviceProfile) and the plan's device (plan.Device) hold.
type Peaks struct {
	FP32 float64 `json:"fp32"`
	TF32 float64 `json:"tf32"`
	FP16 float64 `json:"fp16"`
	BF16 float64 `json:"bf16"`
}

// Peak returns the rate in a precision ("fp32", "tf32", "fp16", "bf16"),
// 0 for one the device does not support or pipe does not know.
func (p Peaks) Peak(precision string) float64 {
	switch precision {
	case "fp32":
		return p.FP32
	case "tf32":
		return p.TF32
	case "fp16":
		return p.FP16
	case "bf16":
		return p.BF16
	}
	return 0
}

// Device is a device block: a device described by hand. Fields the block
// leaves out are zero (At.Has says which were given); Kind is "" for the
// default, a GPU.
type Device struct {
	Name       string  `json:"name"`
	Kind       string  `json:"kind,omitempty" pipe:"kind"`
	Memory     int64   `json:"memory" pipe:"memory"`
	Bandwidth  float64 `json:"bandwidth" pipe:"bandwidth"`
	FP32       float64 `json:"fp32,omitempty" pipe:"fp32"`
	TF32       float64 `json:"tf32,omitempty" pipe:"tf32"`
	FP16       float64 `json:"fp16,omitempty" pipe:"fp16"`
	BF16       float64 `json:"bf16,omitempty" pipe:"bf16"`
	Cores      int64   `json:"cores,omitempty" pipe:"cores"`
	HostMemory int64   `json:"host_memory,omitempty" pipe:"host_memory"`
	At         Where   `json:"at"`
}
