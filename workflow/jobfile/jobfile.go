package jobfile

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	"pipe/planner"
	"pipe/planner/plan"
)

// Job is what every job file records: the plan, its JSON as written next
// to (or into) the job file, and the source it was made from.
type Job struct {
	Plan *plan.Plan
	// PlanJSON is the plan as the job reads it (plan.MarshalIndent).
	PlanJSON []byte
	// Source is the .pipe file's bytes; SourceName the file's name as
	// the job file names it.
	Source     []byte
	SourceName string
}

// Summary is the plan's key figures, one line each, for a job file's
// header.
func (j *Job) Summary() []string {
	p := j.Plan
	d := p.Distributed
	lines := []string{
		fmt.Sprintf("source %s, sha256 %s", j.SourceName, p.SourceSHA256),
		fmt.Sprintf("plan sha256 %s", SHA256(j.PlanJSON)),
		fmt.Sprintf("pipeline %s, model %s: %s parameters", p.Pipeline, p.Model, planner.FormatCount(p.Parameters)),
		fmt.Sprintf("device %s (%s), engine %s, %d node(s) × %d device(s) = %d, %s", p.Device.Name, p.Backend, p.EngineName(),
			max(d.NNodes, 1), max(d.NProcPerNode, 1), p.WorldSize(), orNone(d.Backend)),
		fmt.Sprintf("batch %d a device × %d accumulation × %d devices = %d a step, %s precision", p.BatchSize, p.AccumulationSteps,
			p.WorldSize(), p.EffectiveBatch, p.Precision.Compute),
		fmt.Sprintf("memory %s of %s a device", planner.FormatBytes(p.Memory.Total), planner.FormatBytes(p.Memory.Budget)),
	}
	if d.AllReduceBytes > 0 {
		lines = append(lines, fmt.Sprintf("all-reduce %s a device a step", planner.FormatBytes(d.AllReduceBytes)))
	}
	if st := p.StepTime; st.Bound != "unknown" && st.StepSeconds > 0 {
		l := fmt.Sprintf("step time %.4g s (roofline estimate)", st.StepSeconds)
		if st.HostSeconds > 0 {
			l = fmt.Sprintf("step time %.4g s (estimate: the roofline's %.4g s and the engine's host floor %.4g s)", st.StepSeconds, st.RooflineSeconds, st.HostSeconds)
		}
		if st.AllReduceSeconds > 0 {
			l += fmt.Sprintf(", all-reduce %.4g s of it over %s at %s", st.AllReduceSeconds, st.Network, planner.FormatBandwidth(st.NetworkBandwidth))
		}
		lines = append(lines, l)
	}
	return lines
}

func orNone(s string) string {
	if s == "" {
		return "no process group"
	}
	return s
}

// SHA256 is b's sha256 in hex.
func SHA256(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// Name makes s a Kubernetes name (RFC 1123 label: lower case letters,
// digits and '-', at most 63, starting and ending alphanumeric), and a
// SLURM job name.
func Name(s string) string {
	n := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(n) > 50 {
		n = strings.TrimRight(n[:50], "-")
	}
	if n == "" || n[0] < 'a' {
		n = "pipe-" + n
	}
	return strings.TrimRight(n, "-")
}
