package plan

// Serve is how `pipe serve` answers requests, planned from the device's
// memory and the serve block's latency target: the batching, the workers,
// the queue past which it sheds load, and the limits that keep a slow or
// oversized request from holding the server. Each automatic choice is in
// Decisions with its reason, as the training choices are in Plan's.
type Serve struct {
	// MaxBatch is the most samples a worker runs together (1: batching
	// off); MaxWaitSeconds how long the first request of a batch waits
	// for others to join it.
	MaxBatch       int64   `json:"max_batch"`
	MaxWaitSeconds float64 `json:"max_wait_seconds"`
	// Workers is the number of models answering in parallel, each with
	// ThreadsPerWorker compute threads (on the CPU) and its own weights.
	Workers          int `json:"workers"`
	ThreadsPerWorker int `json:"threads_per_worker"`
	// Queue is the most requests admitted at once (read whole, then
	// waiting or running); past it the server answers 503.
	Queue int64 `json:"queue"`
	// LatencyTargetSeconds is the target max_wait and one batch's forward
	// time fit within; TimeoutSeconds bounds reading, answering and
	// writing one request.
	LatencyTargetSeconds float64 `json:"latency_target_seconds"`
	TimeoutSeconds       float64 `json:"timeout_seconds"`
	// Precision is fp32 or int8; CalibrateBatches how many training
	// batches int8 calibrates its activation scales on.
	Precision        string `json:"precision"`
	CalibrateBatches int64  `json:"calibrate_batches,omitempty"`
	// MaxBodyBytes is the largest request body read; larger ones get 413.
	MaxBodyBytes int64 `json:"max_body_bytes"`
	// MaxDecodePixels is the largest image, by its header, an image model
	// decodes (0: the model reads no images); a larger one gets 413 before
	// it is decoded. DecodeBytes is what one decode holds at most, Decodes
	// how many run at once: a request waits, within its timeout, for one
	// of the Decodes slots.
	MaxDecodePixels int64 `json:"max_decode_pixels,omitempty"`
	DecodeBytes     int64 `json:"decode_bytes,omitempty"`
	Decodes         int64 `json:"decodes,omitempty"`
	// ForwardSeconds is the roofline estimate of one worker's forward
	// pass at MaxBatch while every worker runs (0: the device's peaks are
	// unknown): an estimate, not a measurement.
	ForwardSeconds float64 `json:"forward_seconds"`
	// WorkerStaticBytes is one worker's weights and fixed buffers,
	// SampleBytes what one more sample of a batch adds (the forward's
	// working memory, its input and output), RequestBytes the most one
	// admitted request holds (its body and its decoded samples).
	WorkerStaticBytes int64 `json:"worker_static_bytes"`
	SampleBytes       int64 `json:"sample_bytes"`
	RequestBytes      int64 `json:"request_bytes"`
	// Fits says the workers, their batches and a full queue fit Budget
	// (an error diagnostic says what does not).
	Fits bool `json:"fits"`
	// Memory is the serving process's estimated peak: the runtime, every
	// worker at MaxBatch, a full queue and Decodes decodes of DecodeBytes;
	// Budget what it may use.
	Memory int64 `json:"memory"`
	Budget int64 `json:"budget"`
	// Decisions are the serving choices with their reasons.
	Decisions []Decision `json:"decisions"`
}
