package serve

import "github.com/prometheus/client_golang/prometheus"

// metrics are the server's Prometheus series.
type metrics struct {
	requests   *prometheus.CounterVec
	batchSize  prometheus.Histogram
	queueTime  prometheus.Histogram
	latency    prometheus.Histogram
	queueDepth prometheus.Gauge
	inFlight   prometheus.Gauge
	reading    prometheus.Gauge
	decoding   prometheus.Gauge
}

func newMetrics(reg *prometheus.Registry, maxBatch int) metrics {
	// Batch sizes in powers of two up to the largest batch.
	var sizes []float64
	for b := 1; ; b *= 2 {
		sizes = append(sizes, float64(b))
		if b >= maxBatch {
			break
		}
	}
	m := metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pipe_serve_requests_total",
			Help: "Prediction requests answered, by HTTP status code."}, []string{"code"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pipe_serve_batch_size",
			Help: "Samples in each batch the model ran.", Buckets: sizes}),
		queueTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pipe_serve_queue_seconds",
			Help: "Time a request waited between being queued and its batch starting.", Buckets: prometheus.ExponentialBuckets(1e-4, 2, 16)}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pipe_serve_request_duration_seconds",
			Help: "Time from a prediction request's arrival to its answer.", Buckets: prometheus.ExponentialBuckets(5e-4, 2, 16)}),
		queueDepth: prometheus.NewGauge(prometheus.GaugeOpts{Name: "pipe_serve_queue_depth",
			Help: "Samples queued, not yet in a batch."}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "pipe_serve_in_flight",
			Help: "Prediction requests admitted: queued or running."}),
		reading: prometheus.NewGauge(prometheus.GaugeOpts{Name: "pipe_serve_reading",
			Help: "Prediction requests whose body is being read, not yet admitted."}),
		decoding: prometheus.NewGauge(prometheus.GaugeOpts{Name: "pipe_serve_decoding",
			Help: "Uploaded images being decoded, each holding one of the decode slots."}),
	}
	reg.MustRegister(m.requests, m.batchSize, m.queueTime, m.latency, m.queueDepth, m.inFlight, m.reading, m.decoding,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}
