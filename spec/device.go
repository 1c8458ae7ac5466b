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
