package stdlib

import "pipe/lang"

// Serving precisions: int8 quantises dense and conv weights per channel,
// with activation scales calibrated on training batches.
var servePrecisions = []string{"fp32", "int8"}

// serveBlock is the serve block: how `pipe serve` batches requests and
// bounds its queue. The planner sizes what is auto (planner/serve.go).
func serveBlock() *lang.BlockSpec {
	return &lang.BlockSpec{Name: "serve", Once: true,
		Doc: "How pipe serve answers requests: dynamic batching, workers, the queue it sheds load past, timeouts and precision.",
		Fields: []*lang.FieldSpec{
			field("max_batch", "The most samples run together; auto picks the largest whose estimated forward time and max_wait fit the latency target and whose memory fits the device.",
				arg("max_batch", lang.TInt, "At least 1 (1 turns batching off), or auto.", positional, required, atLeast(1), auto, def("auto"))),
			field("max_wait", "How long the first request of a batch waits for others to join it.",
				arg("max_wait", lang.TDuration, "A duration such as 5ms (0s never waits), or auto.", positional, required, atLeast(0), auto, def("auto"))),
			field("workers", "Models answering in parallel, each with its own copy of the weights and its share of the cores.",
				arg("workers", lang.TInt, "At least 1, or auto.", positional, required, atLeast(1), auto, def("auto"))),
			field("queue", "The most requests admitted at once (read whole, then queued or running); past it the server answers 503 with Retry-After.",
				arg("queue", lang.TInt, "At least 1, or auto (sized to memory and to what the workers answer within the timeout).", positional, required, atLeast(1), auto, def("auto"))),
			field("latency_target", "The latency a request should see: max_wait plus one batch's estimated forward time stays within it.",
				arg("latency_target", lang.TDuration, "A duration such as 50ms.", positional, required, above(0), def("100ms"))),
			field("timeout", "How long a request may take to be read, answered and written; a slow client cannot hold a worker longer.",
				arg("timeout", lang.TDuration, "A duration such as 30s.", positional, required, above(0), def("30s"))),
			field("max_decode_factor", "An image model's largest upload, by its header: this many times the input's pixels (at least 2048x2048); a larger one gets 413 before it is decoded.",
				arg("max_decode_factor", lang.TInt, "At least 1.", positional, required, atLeast(1), def("16"))),
			field("decodes", "How many uploaded images decode at once; a request waits, within its timeout, for a slot.",
				arg("decodes", lang.TInt, "At least 1, or auto (one per core, within the memory the workers' batches leave).", positional, required, atLeast(1), auto, def("auto"))),
			field("precision", "The arithmetic of inference: fp32, or int8 (dense and conv weights quantised per channel, activation scales calibrated on training batches).",
				arg("precision", lang.TEnum, "fp32 | int8.", positional, required, enum(servePrecisions...), def("fp32"))),
			field("calibrate", "With precision int8: how many training batches the workers' int8 models measure their activation ranges on.",
				arg("calibrate", lang.TInt, "At least 1.", positional, required, atLeast(1), def("8"))),
		}}
}
