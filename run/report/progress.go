package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/schollz/progressbar/v3"

	"pipe/run"
)

// Progress shows a run's progress: on a terminal, a progress bar over the
// run's optimizer steps with the epoch, the loss, the samples per second
// and the time left, and a line per epoch above it; elsewhere (a log
// file, CI), log lines through go-hclog: one every Every steps and one per
// epoch.
type Progress struct {
	w        io.Writer
	log      hclog.Logger
	terminal bool
	// Every is the number of steps between log lines; 0 gives about ten
	// lines an epoch.
	Every int64

	bar   *progressbar.ProgressBar
	start run.StartInfo
	last  run.StepInfo
	began time.Time
}

// NewProgress returns a progress display writing to w: a bar when
// terminal is set, log lines through log otherwise.
func NewProgress(w io.Writer, log hclog.Logger, terminal bool) *Progress {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Progress{w: w, log: log, terminal: terminal}
}

// Hooks returns the hooks that feed the display, for run.Run.
func (p *Progress) Hooks() run.Hooks {
	return run.Hooks{Start: p.onStart, Step: p.onStep, Evaluating: p.onEvaluating, Epoch: p.onEpoch, Checkpoint: p.onCheckpoint}
}

// Close removes the bar, so what follows starts on a clean line.
func (p *Progress) Close() {
	if p.bar != nil {
		_ = p.bar.Clear()
		p.bar = nil
	}
}

func (p *Progress) onStart(s run.StartInfo) {
	p.start, p.began = s, time.Now()
	from := ""
	if s.From.Step > 0 {
		from = fmt.Sprintf(", resuming at epoch %d step %d", s.From.Epoch+1, s.From.Step)
	}
	batch := fmt.Sprint(s.BatchSize)
	if s.AccumulationSteps > 1 {
		batch = fmt.Sprintf("%d × %d accumulation steps = %d", s.BatchSize, s.AccumulationSteps, s.EffectiveBatch)
	}
	if p.terminal {
		fmt.Fprintf(p.w, "training %s on %s (%s): %d epochs of %d steps, batch %s, %d samples%s\n",
			s.Model, s.Backend, s.Precision, s.Epochs, s.StepsPerEpoch, batch, s.TrainSamples, from)
		p.bar = progressbar.NewOptions64(s.TotalSteps,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionSetElapsedTime(false),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetDescription(fmt.Sprintf("epoch %d/%d", s.From.Epoch+1, s.Epochs)),
		)
		_ = p.bar.Set64(s.From.Step)
		return
	}
	p.log.Info("training", "model", s.Model, "backend", s.Backend, "precision", s.Precision, "epochs", s.Epochs,
		"steps_per_epoch", s.StepsPerEpoch, "batch", batch, "samples", s.TrainSamples, "validation_samples", s.ValSamples,
		"from_step", s.From.Step)
}

func (p *Progress) onStep(s run.StepInfo) {
	p.last = s
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("epoch %d/%d  loss %s  %.0f samples/s  ETA %s",
			s.Epoch, p.start.Epochs, Num(s.Loss), s.SamplesPerSecond, Duration(s.ETA)))
		_ = p.bar.Set64(s.Step)
		return
	}
	every := p.Every
	if every <= 0 {
		every = max(s.StepsPerEpoch/10, 1)
	}
	if s.EpochStep%every == 0 || s.Step == s.TotalSteps {
		p.log.Info("step", "epoch", fmt.Sprintf("%d/%d", s.Epoch, p.start.Epochs),
			"step", fmt.Sprintf("%d/%d", s.EpochStep, s.StepsPerEpoch), "loss", round(s.Loss), "lr", fmt.Sprintf("%.4g", s.LR),
			"samples_per_s", math.Round(s.SamplesPerSecond), "eta", Duration(s.ETA))
	}
}

func (p *Progress) onEvaluating(what string, n int) {
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("epoch %d/%d  evaluating on %s (%d samples)", max(p.last.Epoch, 1), p.start.Epochs, what, n))
		_ = p.bar.RenderBlank()
		return
	}
	p.log.Debug("evaluating", "on", what, "samples", n)
}

func (p *Progress) onEpoch(e run.EpochResult) {
	line := EpochLine(e, p.start.Epochs)
	if p.bar != nil {
		_ = p.bar.Clear()
		fmt.Fprintln(p.w, line)
		return
	}
	args := []any{"epoch", fmt.Sprintf("%d/%d", e.Epoch, p.start.Epochs), "train_loss", round(e.TrainLoss)}
	if e.Val != nil {
		args = append(args, "val_loss", round(e.Val.Loss))
		for _, m := range e.Val.Metrics {
			args = append(args, m.Name, round(m.Value))
		}
	}
	args = append(args, "time", Duration(time.Duration(e.Seconds*float64(time.Second))),
		"loader_stall", StallLine(e.LoaderStallSeconds, e.Seconds))
	p.log.Info("epoch done", args...)
}

func (p *Progress) onCheckpoint(path, reason string) {
	if reason == "epoch" {
		p.log.Debug("checkpoint", "path", path)
		return
	}
	if p.bar != nil {
		_ = p.bar.Clear()
		fmt.Fprintf(p.w, "checkpoint written to %s (%s)\n", path, reason)
		return
	}
	p.log.Info("checkpoint", "path", path, "reason", reason)
}

// EpochLine is one line about an epoch: its losses and metrics.
func EpochLine(e run.EpochResult, epochs int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %d/%d: train loss %s", e.Epoch, epochs, Num(e.TrainLoss))
	if e.Val != nil {
		fmt.Fprintf(&b, ", %s loss %s", e.Val.Source, Num(e.Val.Loss))
		for _, m := range e.Val.Metrics {
			fmt.Fprintf(&b, ", %s %s", m.Name, Num(m.Value))
		}
	}
	fmt.Fprintf(&b, " (%s; %s)", Duration(time.Duration(e.Seconds*float64(time.Second))), StallLine(e.LoaderStallSeconds, e.Seconds))
	return b.String()
}

// StallLine says how long the training step waited for data out of the
// epoch's time: "loader stall 1.2 s of 40 s (3%)".
func StallLine(stall, total float64) string {
	pct := 0.0
	if total > 0 {
		pct = 100 * stall / total
	}
	return fmt.Sprintf("loader stall %s of %s (%.0f%%)", secs(stall), secs(total), pct)
}

// secs formats seconds with two significant digits below 10 s.
func secs(s float64) string {
	switch {
	case s < 0.01:
		return fmt.Sprintf("%.0f ms", s*1e3)
	case s < 10:
		return fmt.Sprintf("%.2g s", s)
	}
	return fmt.Sprintf("%.0f s", s)
}

func round(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	return math.Round(v*1e4) / 1e4
}

// Duration formats d to the second: 45s, 3m05s, 1h02m.
func Duration(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	default:
		return fmt.Sprintf("%dh%02dm", s/3600, (s%3600)/60)
	}
}
