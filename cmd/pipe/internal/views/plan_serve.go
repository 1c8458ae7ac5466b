package views

import (
	"fmt"
	"io"
	"text/tabwriter"

	"pipe/planner"
	"pipe/planner/plan"
)

// serving prints the serving plan, when there is one: what pipe serve
// runs and each choice with its reason.
func serving(w io.Writer, p *plan.Plan) {
	s := p.Serve
	if s == nil {
		return
	}
	fmt.Fprintf(w, "\nServing (%s): max_batch %d, max_wait %s, %s × %s, queue %d, body limit %s\n",
		s.Precision, s.MaxBatch, Seconds(s.MaxWaitSeconds), Count(s.Workers, "worker", "workers"), Count(s.ThreadsPerWorker, "thread", "threads"),
		s.Queue, planner.FormatBytes(s.MaxBodyBytes))
	if s.ForwardSeconds > 0 {
		fmt.Fprintf(w, "  forward at max_batch %s (roofline estimate) + max_wait %s, latency target %s\n",
			Seconds(s.ForwardSeconds), Seconds(s.MaxWaitSeconds), Seconds(s.LatencyTargetSeconds))
	}
	fmt.Fprintf(w, "  memory %s of a %s budget: %s weights a worker, %s a sample, %s a request at most\n",
		planner.FormatBytes(s.Memory), planner.FormatBytes(s.Budget), planner.FormatBytes(s.WorkerStaticBytes),
		planner.FormatBytes(s.SampleBytes), planner.FormatBytes(s.RequestBytes))
	if s.Decodes > 0 {
		fmt.Fprintf(w, "  image decodes %s in that memory: %d at once of %s each (images of at most %d pixels by their header)\n",
			planner.FormatBytes(s.Decodes*s.DecodeBytes), s.Decodes, planner.FormatBytes(s.DecodeBytes), s.MaxDecodePixels)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, d := range s.Decisions {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", d.What, d.Value, d.Reason)
	}
	tw.Flush()
}

// Seconds renders a duration in seconds as 5ms, 1.2s or 300µs.
func Seconds(s float64) string {
	switch {
	case s == 0:
		return "0s"
	case s >= 1:
		return fmt.Sprintf("%.3gs", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.3gms", s*1e3)
	default:
		return fmt.Sprintf("%.3gµs", s*1e6)
	}
}
