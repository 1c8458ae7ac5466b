package spec

// Serve is the serve block: how pipe serve batches requests and bounds
// its queue. A setting left out is nil (the planner's default or its
// choice); the durations are in seconds.
type Serve struct {
	MaxBatch        *Auto[int64]   `json:"max_batch,omitempty" pipe:"max_batch"`
	MaxWait         *Auto[float64] `json:"max_wait,omitempty" pipe:"max_wait"`
	Workers         *Auto[int64]   `json:"workers,omitempty" pipe:"workers"`
	Queue           *Auto[int64]   `json:"queue,omitempty" pipe:"queue"`
	LatencyTarget   *float64       `json:"latency_target,omitempty" pipe:"latency_target"`
	Timeout         *float64       `json:"timeout,omitempty" pipe:"timeout"`
	MaxDecodeFactor *int64         `json:"max_decode_factor,omitempty" pipe:"max_decode_factor"`
	Decodes         *Auto[int64]   `json:"decodes,omitempty" pipe:"decodes"`
	// Precision is "" for the default, fp32.
	Precision string `json:"precision,omitempty" pipe:"precision"`
	Calibrate *int64 `json:"calibrate,omitempty" pipe:"calibrate"`
	At        Where  `json:"at"`
}
