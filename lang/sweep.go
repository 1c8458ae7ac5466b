package lang

import (
	"fmt"
	"strconv"
	"strings"

	"pipe/diag"
)

// SweepKinds are a sweep block's parameter fields, one distribution each.
var SweepKinds = []string{"uniform", "loguniform", "int", "choice"}

// A SweepParam is one parameter line of a sweep block: the --set path it
// varies and the values it may take.
type SweepParam struct {
	Path string
	// Kind is uniform, loguniform, int or choice.
	Kind      string
	Low, High float64
	// Log draws an int's logarithm uniformly.
	Log bool
	// Choices are a choice's values as the file writes them.
	Choices []string
	// Range is the line's, PathRange its path's.
	Range, PathRange diag.Range
}

// SweepParams reads the parameters of p's sweep block (none without one)
// and checks each against src, the file p was checked from: its path
// must name a value of the file, as --set's would (a misspelt one gets a
// did-you-mean), and its bounds or choices must be values the file would
// accept there, each applied as an override and checked. Every mistake
// is a diagnostic at the parameter's line. The block's metric is checked
// too (checkSweepMetric).
func SweepParams(p *Program, src []byte, schema Schema) ([]SweepParam, diag.Diagnostics) {
	b := p.Block("sweep")
	if b == nil {
		return nil, nil
	}
	var out []SweepParam
	ds := checkSweepMetric(p, b)
	seen := map[string]diag.Range{}
	for _, f := range b.Fields {
		if !contains(SweepKinds, f.Name) {
			continue
		}
		pv := f.Args["path"]
		if pv == nil {
			continue // the checker said so
		}
		sp := SweepParam{Path: pv.Str, Kind: f.Name, Range: f.Range, PathRange: pv.Range}
		var values []*Value
		switch f.Name {
		case "choice":
			v := f.Args["values"]
			if v == nil {
				continue
			}
			if len(v.List) == 0 {
				ds = append(ds, diag.Errorf(v.Range, "sweep", "a choice needs values", "Write choice %q [A, B, ...].", sp.Path))
				continue
			}
			for _, e := range v.List {
				sp.Choices = append(sp.Choices, e.Str)
			}
			values = v.List
		default:
			lo, hi := f.Args["low"], f.Args["high"]
			if lo == nil || hi == nil {
				continue
			}
			sp.Low, sp.High = lo.Float, hi.Float
			if lg := f.Args["log"]; lg != nil {
				sp.Log = lg.Bool
			}
			if sp.Low > sp.High {
				ds = append(ds, diag.Errorf(diag.Join(lo.Range, hi.Range), "sweep", fmt.Sprintf("%s %q: the range is reversed", f.Name, sp.Path),
					"low %s is above high %s.", sweepNum(lo), sweepNum(hi)))
				continue
			}
			if sp.Log && sp.Low <= 0 {
				ds = append(ds, diag.Errorf(lo.Range, "sweep", fmt.Sprintf("int %q log needs low above 0", sp.Path),
					"A logarithm is drawn; give low 1 or more, or leave out log."))
				continue
			}
			values = []*Value{lo, hi}
		}
		if prev, dup := seen[sp.Path]; dup {
			ds = append(ds, diag.Errorf(pv.Range, "sweep", fmt.Sprintf("%q is swept twice", sp.Path),
				"Line %d already sweeps it; keep one.", prev.Start.Line))
			continue
		}
		seen[sp.Path] = pv.Range
		if d := checkSweepValues(p.File.Name, src, sp, values, schema); len(d) > 0 {
			ds = append(ds, d...)
			continue
		}
		out = append(out, sp)
	}
	return out, ds
}

func sweepNum(v *Value) string {
	if v.Type == TInt {
		return strconv.FormatInt(v.Int, 10)
	}
	return strconv.FormatFloat(v.Float, 'g', -1, 64)
}

// checkSweepValues applies sp's path with each value as an override of
// src; what the override machinery says is moved onto the sweep's line.
func checkSweepValues(name string, src []byte, sp SweepParam, values []*Value, schema Schema) diag.Diagnostics {
	var ds diag.Diagnostics
	for _, v := range values {
		text := v.Str
		if v.Type != TWord {
			text = sweepNum(v)
		}
		sets, pds := ParseSets([]string{sp.Path + "=" + text})
		if pds.HasErrors() {
			for _, d := range pds {
				ds = append(ds, diag.Errorf(sp.PathRange, "sweep", fmt.Sprintf("%q is not a path: %s", sp.Path, d.Summary), "%s", d.Detail))
			}
			return ds
		}
		_, ods := Override(name, src, sets, schema)
		for _, d := range ods.Errs() {
			why := strings.TrimPrefix(d.Summary, "--set "+sets[0].String()+": ")
			at, summary := v.Range, fmt.Sprintf("%s %q: %s is refused: %s", sp.Kind, sp.Path, text, why)
			if d.Subject != nil && d.Subject.File == CommandLine && d.Subject.Start.Byte < len("--set ")+len(sp.Path) {
				// The path itself names nothing: say so once, at the path.
				at, summary = sp.PathRange, fmt.Sprintf("%s %q: %s", sp.Kind, sp.Path, d.Summary)
				ds = append(ds, diag.Errorf(at, "sweep", summary, "%s", d.Detail))
				return ds
			}
			ds = append(ds, diag.Errorf(at, "sweep", summary, "%s", d.Detail))
		}
	}
	return ds
}

// checkSweepMetric refuses a sweep metric the trials will not measure:
// one that is neither loss nor among train's metrics, or any at all
// when the run has no data to validate on (the train source has no
// split and there is no evaluate block). Either would leave every trial
// without a score to rank it by, found only once trials had trained.
func checkSweepMetric(p *Program, b *Block) diag.Diagnostics {
	metric, at := "loss", b.KindRange
	if f := b.Field("metric"); f != nil {
		at = f.Range
		if v := f.First(); v != nil {
			metric, at = v.Str, v.Range
		}
	}
	measured := []string{"loss"}
	if v := p.Block("train").Arg("metrics", "metrics"); v != nil {
		for _, e := range v.List {
			measured = append(measured, e.Str)
		}
	}
	if src := p.TrainSource(); src != nil && src.Field("split") == nil && p.Block("evaluate") == nil {
		return diag.Diagnostics{diag.Errorf(at, "sweep", fmt.Sprintf("sweep metric %s: the trials measure nothing", metric),
			"Source %s has no split and the file has no evaluate block, so no data is held out: a trial measures neither its loss nor its metrics after an epoch. Add split 0.9 to source %s, or an evaluate block.",
			src.Name(), src.Name())}
	}
	if contains(measured, metric) {
		return nil
	}
	return diag.Diagnostics{diag.Errorf(at, "sweep", fmt.Sprintf("sweep metric %s: the trials do not measure it", metric),
		"The trials measure the validation loss and train's metrics: %s. Rank by one of them, or add %s to train's metrics.",
		strings.Join(measured, ", "), metric)}
}
