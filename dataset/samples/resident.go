package samples

// Resident is a training set as a device keeps it (plan.DataOnDevice):
// N samples of Per bytes each, sample i's inputs X[i·Per : (i+1)·Per] as
// the source holds them, and its class index Labels[i]. The loader reads
// byte v as LUT[v] (its normalisation, computed once per byte value), so
// a device that gathers the bytes by index and looks them up in LUT has
// the loader's float32 inputs bit for bit.
type Resident struct {
	X      []byte
	Per    int
	Labels []byte
	LUT    [256]float32
}

// N is the number of samples.
func (r *Resident) N() int { return len(r.Labels) }
