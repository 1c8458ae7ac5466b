package tensorboard

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"pipe/planner/plan"
	"pipe/run"
	"pipe/run/tensorboard/tbpb"
	"pipe/run/tensorboard/tbpb/hparamspb"
)

// Tags of the HParams plugin's summaries, and the plugin's name.
const (
	HParamsPlugin     = "hparams"
	ExperimentTag     = "_hparams_/experiment"
	SessionStartTag   = "_hparams_/session_start_info"
	SessionEndTag     = "_hparams_/session_end_info"
	liveFlushInterval = 5 * time.Second
)

// Config is what a Logger needs besides the run's hooks.
type Config struct {
	// Dir is the run's folder, where the event file goes.
	Dir string
	// Plan is the run's plan: its overrides and choices are the
	// session's hyper-parameters.
	Plan *plan.Plan
	// Metrics are the names of the metrics evaluated after each epoch,
	// FinalMetrics those of the final evaluation.
	Metrics, FinalMetrics []string
	// Log takes the one warning a failed write gives; nil for none.
	Log hclog.Logger
	// Now is the clock; nil for time.Now.
	Now func() time.Time
}

// Logger writes one run's event file as the run goes: the hyper-parameters
// and the planned memory at its start, each step's loss, learning rate and
// samples/s, each epoch's results (flushed to disk), and at the end the
// final evaluation, the measured memory and how the session ended. A write
// that fails is warned about once and ends the logging, not the run.
type Logger struct {
	cfg      Config
	w        *Writer
	failed   bool
	flushed  time.Time
	samples  int64 // this invocation's samples at the last step
	epochAt  int64 // samples at the end of the last epoch
	lastStep int64
}

// New returns a Logger for cfg; it creates its file when the run starts.
func New(cfg Config) *Logger {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	return &Logger{cfg: cfg}
}

// Path is the event file's path, "" before the run started.
func (l *Logger) Path() string {
	if l.w == nil {
		return ""
	}
	return l.w.path
}

// Hooks are the run hooks that feed the Logger.
func (l *Logger) Hooks() run.Hooks {
	return run.Hooks{Start: l.start, Step: l.step, Epoch: l.epoch}
}

// open creates the event file and writes what is known before training:
// for a resumed run a SessionLog START at its step (readers drop what an
// earlier file wrote after it), the HParams experiment and session start,
// the planned memory.
func (l *Logger) open(from int64, val bool) bool {
	if l.w != nil || l.failed {
		return l.w != nil
	}
	now := l.cfg.Now()
	w, err := Create(l.cfg.Dir, now)
	if err != nil {
		l.fail(err)
		return false
	}
	l.w, l.flushed, l.lastStep = w, now, from
	if from > 0 {
		w.Event(&tbpb.Event{WallTime: Seconds(now), Step: from,
			What: &tbpb.Event_SessionLog{SessionLog: &tbpb.SessionLog{Status: tbpb.SessionLog_START}}})
	}
	hp := HParams(l.cfg.Plan)
	l.hparams(from, now, &hparamspb.HParamsPluginData{Data: &hparamspb.HParamsPluginData_Experiment{
		Experiment: experiment(hp, l.cfg.Metrics, l.cfg.FinalMetrics, val, now)}}, ExperimentTag)
	l.hparams(from, now, &hparamspb.HParamsPluginData{Data: &hparamspb.HParamsPluginData_SessionStartInfo{
		SessionStartInfo: &hparamspb.SessionStartInfo{Hparams: hp, ModelUri: l.cfg.Dir, StartTimeSecs: Seconds(now)}}}, SessionStartTag)
	if p := l.cfg.Plan; p != nil && p.Memory.Total > 0 {
		w.Scalars(from, now, Scalar{"memory/planned_bytes", float64(p.Memory.Total)})
	}
	return l.sync()
}

func (l *Logger) start(si run.StartInfo) { l.open(si.From.Step, si.ValSamples > 0) }

func (l *Logger) step(si run.StepInfo) {
	if l.w == nil {
		return
	}
	now := l.cfg.Now()
	l.samples, l.lastStep = si.Samples, si.Step
	l.w.Scalars(si.Step, now, Scalar{"step/loss", si.Loss}, Scalar{"step/lr", si.LR},
		Scalar{"step/samples_per_second", si.SamplesPerSecond})
	// A live run shows in TensorBoard every few seconds, without a sync.
	if now.Sub(l.flushed) >= liveFlushInterval {
		l.flushed = now
		if err := l.w.Flush(); err != nil {
			l.fail(err)
		}
	}
}

func (l *Logger) epoch(er run.EpochResult) {
	if l.w == nil {
		return
	}
	vs := []Scalar{{"epoch/train_loss", er.TrainLoss}}
	if er.Val != nil {
		vs = append(vs, Scalar{"epoch/val_loss", er.Val.Loss})
		for _, m := range er.Val.Metrics {
			vs = append(vs, Scalar{"epoch/" + m.Name, m.Value})
		}
	}
	vs = append(vs, Scalar{"epoch/lr", er.LR}, Scalar{"epoch/seconds", er.Seconds},
		Scalar{"epoch/loader_stall_seconds", er.LoaderStallSeconds})
	if er.Seconds > 0 {
		vs = append(vs, Scalar{"epoch/samples_per_second", float64(l.samples-l.epochAt) / er.Seconds})
	}
	l.epochAt = l.samples
	l.w.Scalars(er.Step, l.cfg.Now(), vs...)
	l.sync()
}

// Finish writes the run's end (the final evaluation, samples/s, planned
// and measured memory, the HParams session end) and closes the file. A
// run that never started training (--skip-train) gets its file here.
func (l *Logger) Finish(res *run.Result) {
	if res == nil || (l.w == nil && (res.Precision == "" || res.Status != run.StatusSkipped)) {
		l.close()
		return
	}
	step := res.Position.Step
	if !l.open(step, false) {
		return
	}
	now := l.cfg.Now()
	var vs []Scalar
	if f := res.Final; f != nil {
		vs = append(vs, Scalar{"final/loss", f.Loss})
		for _, m := range f.Metrics {
			vs = append(vs, Scalar{"final/" + m.Name, m.Value})
		}
	}
	if res.SamplesPerSecond > 0 {
		vs = append(vs, Scalar{"final/samples_per_second", res.SamplesPerSecond})
	}
	if res.Memory.Estimated > 0 {
		vs = append(vs, Scalar{"memory/planned_bytes", float64(res.Memory.Estimated)})
	}
	if res.Memory.Measured > 0 {
		vs = append(vs, Scalar{"memory/measured_bytes", float64(res.Memory.Measured)})
	}
	l.w.Scalars(step, now, vs...)
	l.hparams(step, now, &hparamspb.HParamsPluginData{Data: &hparamspb.HParamsPluginData_SessionEndInfo{
		SessionEndInfo: &hparamspb.SessionEndInfo{Status: sessionStatus(res.Status), EndTimeSecs: Seconds(now)}}}, SessionEndTag)
	l.close()
}

// sessionStatus is the HParams status of a run's end: an interrupted run
// is to be resumed, so neither a success nor a failure.
func sessionStatus(s run.Status) hparamspb.Status {
	switch s {
	case run.StatusCompleted, run.StatusMaxSteps, run.StatusSkipped:
		return hparamspb.Status_STATUS_SUCCESS
	case run.StatusNonFinite, run.StatusFailed:
		return hparamspb.Status_STATUS_FAILURE
	}
	return hparamspb.Status_STATUS_UNKNOWN
}

func (l *Logger) sync() bool {
	if err := l.w.Sync(); err != nil {
		l.fail(err)
		return false
	}
	return true
}

func (l *Logger) close() {
	if l.w == nil {
		return
	}
	if err := l.w.Close(); err != nil {
		l.cfg.Log.Warn("TensorBoard event file not fully written", "file", l.w.path, "error", err)
	}
	l.w = nil
}

// fail warns once and stops the logging.
func (l *Logger) fail(err error) {
	if l.failed {
		return
	}
	l.failed = true
	l.cfg.Log.Warn("TensorBoard events not written; the run goes on", "folder", l.cfg.Dir, "error", err)
	if l.w != nil {
		l.w.f.Close()
		l.w = nil
	}
}

// hparams frames one HParams plugin summary at step.
func (l *Logger) hparams(step int64, now time.Time, d *hparamspb.HParamsPluginData, tag string) {
	content, err := proto.Marshal(d)
	if err != nil {
		panic(err)
	}
	v := &tbpb.Summary_Value{Tag: tag,
		Metadata: &tbpb.SummaryMetadata{
			PluginData: &tbpb.SummaryMetadata_PluginData{PluginName: HParamsPlugin, Content: content},
			DataClass:  tbpb.DataClass_DATA_CLASS_TENSOR},
		// The plugin's summaries carry a placeholder tensor, a float32 0.
		Value: &tbpb.Summary_Value_Tensor{Tensor: &tbpb.TensorProto{Dtype: tbpb.DataType_DT_FLOAT,
			TensorShape: &tbpb.TensorShapeProto{}, FloatVal: []float32{0}}}}
	l.w.Event(&tbpb.Event{WallTime: Seconds(now), Step: step,
		What: &tbpb.Event_Summary{Summary: &tbpb.Summary{Value: []*tbpb.Summary_Value{v}}}})
}

// HParams are a run's hyper-parameters: each --set override under its
// path (a number, true or false, else the text), and the plan's choices
// under plan.*: batch_size, accumulation_steps, effective_batch, lr,
// precision, device.
func HParams(p *plan.Plan) map[string]*structpb.Value {
	hp := map[string]*structpb.Value{}
	if p == nil {
		return hp
	}
	for _, o := range p.Overrides {
		k, v, ok := strings.Cut(o, "=")
		if !ok || k == "" {
			continue
		}
		hp[k] = overrideValue(v)
	}
	hp["plan.batch_size"] = structpb.NewNumberValue(float64(p.BatchSize))
	hp["plan.accumulation_steps"] = structpb.NewNumberValue(float64(p.AccumulationSteps))
	hp["plan.effective_batch"] = structpb.NewNumberValue(float64(p.EffectiveBatch))
	hp["plan.lr"] = structpb.NewNumberValue(p.Optimizer.LR)
	if p.Precision.Compute != "" {
		hp["plan.precision"] = structpb.NewStringValue(p.Precision.Compute)
	}
	if p.Device.Name != "" {
		hp["plan.device"] = structpb.NewStringValue(p.Device.Name)
	}
	return hp
}

// overrideValue is an override's value as the HParams table holds it.
func overrideValue(s string) *structpb.Value {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
		return structpb.NewNumberValue(f)
	}
	switch s {
	case "true":
		return structpb.NewBoolValue(true)
	case "false":
		return structpb.NewBoolValue(false)
	}
	if u, err := strconv.Unquote(s); err == nil {
		s = u
	}
	return structpb.NewStringValue(s)
}

// experiment is the HParams experiment of one run: its hyper-parameters'
// names and types (no domains: the dashboard takes them from the sessions)
// and the metrics' tags.
func experiment(hp map[string]*structpb.Value, metrics, final []string, val bool, now time.Time) *hparamspb.Experiment {
	e := &hparamspb.Experiment{TimeCreatedSecs: Seconds(now)}
	names := make([]string, 0, len(hp))
	for k := range hp {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		t := hparamspb.DataType_DATA_TYPE_STRING
		switch hp[k].GetKind().(type) {
		case *structpb.Value_NumberValue:
			t = hparamspb.DataType_DATA_TYPE_FLOAT64
		case *structpb.Value_BoolValue:
			t = hparamspb.DataType_DATA_TYPE_BOOL
		}
		e.HparamInfos = append(e.HparamInfos, &hparamspb.HParamInfo{Name: k, Type: t})
	}
	metric := func(tag string, d hparamspb.DatasetType) {
		e.MetricInfos = append(e.MetricInfos, &hparamspb.MetricInfo{Name: &hparamspb.MetricName{Tag: tag}, DatasetType: d})
	}
	metric("final/loss", hparamspb.DatasetType_DATASET_UNKNOWN)
	for _, m := range final {
		metric("final/"+m, hparamspb.DatasetType_DATASET_UNKNOWN)
	}
	if val {
		metric("epoch/val_loss", hparamspb.DatasetType_DATASET_VALIDATION)
		for _, m := range metrics {
			metric("epoch/"+m, hparamspb.DatasetType_DATASET_VALIDATION)
		}
	}
	metric("epoch/train_loss", hparamspb.DatasetType_DATASET_TRAINING)
	metric("step/loss", hparamspb.DatasetType_DATASET_TRAINING)
	return e
}
