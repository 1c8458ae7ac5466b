package sweep

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"pipe/run/folder"
)

// Table writes the trials, best first: their values, status, batch,
// epochs trained, last metric, time and why a trial was skipped, stopped
// or failed.
func Table(w io.Writer, s *State) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"TRIAL"}
	for i := range s.Params {
		head = append(head, strings.ToUpper(ShortName(s.Params, i)))
	}
	head = append(head, "STATUS", "BATCH", "EPOCHS", strings.ToUpper(s.Metric), "TIME", "NOTE")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, t := range s.Sorted() {
		row := []string{strconv.Itoa(t.ID)}
		if t.ID == s.Best {
			row[0] += " *"
		}
		row = append(row, t.Values...)
		v, _ := t.Last()
		batch := "-"
		if t.Batch > 0 {
			batch = strconv.FormatInt(t.Batch, 10)
		}
		secs := "-"
		if t.Seconds > 0 {
			secs = fmt.Sprintf("%.0fs", t.Seconds)
		}
		row = append(row, t.Status, batch, strconv.Itoa(len(t.Metrics)), fmtMetric(v), secs, t.Reason)
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

var (
	doneColor    = color.RGBA{R: 31, G: 92, B: 170, A: 255}
	stoppedColor = color.RGBA{R: 214, G: 95, B: 30, A: 255}
)

// Plot draws the metric against each parameter, one panel a parameter
// side by side, as a PNG written atomically to path: completed trials as
// dots, trials stopped early as crosses at their last metric. A
// numeric parameter's axis spans its range; a loguniform (or int log)
// parameter's is logarithmic; a choice's values are spread over its axis
// in the order written. It draws nothing and returns false when no trial
// has a metric.
func Plot(s *State, path string) (wrote bool, err error) {
	some := false
	for _, t := range s.Runs {
		if v, ok := t.Last(); ok && !math.IsNaN(v) && (t.Status == Done || t.Status == Stopped) && len(t.Values) == len(s.Params) {
			some = true
		}
	}
	if !some || len(s.Params) == 0 {
		return false, nil
	}
	// gonum/plot panics on what it cannot draw (a log axis reaching 0):
	// that is an error here, never a crash of the sweep.
	defer func() {
		if r := recover(); r != nil {
			wrote, err = false, fmt.Errorf("sweep plot: %v", r)
		}
	}()
	n := len(s.Params)
	plots := make([][]*plot.Plot, 1)
	for i, p := range s.Params {
		pl, err := panel(s, i, p)
		if err != nil {
			return false, err
		}
		plots[0] = append(plots[0], pl)
	}
	width := vg.Length(n) * 4 * vg.Inch
	height := 4 * vg.Inch
	img := vgimg.New(width, height)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: n, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 2,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for j := range plots[0] {
		plots[0][j].Draw(canvases[0][j])
	}
	err = folder.WriteFileAtomic(path, func(w io.Writer) error {
		_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
		return err
	})
	return err == nil, err
}

// panel is parameter i's plot.
func panel(s *State, i int, p Param) (*plot.Plot, error) {
	pl := plot.New()
	pl.Title.Text = ShortName(s.Params, i)
	pl.X.Label.Text = p.Path
	if i == 0 {
		pl.Y.Label.Text = fmt.Sprintf("%s (%s)", s.Metric, s.Goal)
	}
	pl.Add(plotter.NewGrid())
	logX := p.Kind == "loguniform" || p.Log
	if logX {
		pl.X.Scale = plot.LogScale{}
		pl.X.Tick.Marker = logTicks{}
	}
	if p.Kind == "choice" {
		var ticks []plot.Tick
		for k, c := range p.Choices {
			ticks = append(ticks, plot.Tick{Value: float64(k), Label: c})
		}
		pl.X.Tick.Marker = plot.ConstantTicks(ticks)
	}
	var done, stopped plotter.XYs
	for _, t := range s.Runs {
		v, ok := t.Last()
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) || (t.Status != Done && t.Status != Stopped) || i >= len(t.Values) {
			continue
		}
		x, ok := paramX(p, t.Values[i])
		if !ok || (logX && x <= 0) {
			continue
		}
		if t.Status == Done {
			done = append(done, plotter.XY{X: x, Y: v})
		} else {
			stopped = append(stopped, plotter.XY{X: x, Y: v})
		}
	}
	for _, g := range []struct {
		xys   plotter.XYs
		c     color.Color
		shape draw.GlyphDrawer
		name  string
	}{{done, doneColor, draw.CircleGlyph{}, "completed"}, {stopped, stoppedColor, draw.CrossGlyph{}, "stopped early"}} {
		if len(g.xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(g.xys)
		if err != nil {
			return nil, fmt.Errorf("sweep plot: %w", err)
		}
		sc.GlyphStyle.Color, sc.GlyphStyle.Shape, sc.GlyphStyle.Radius = g.c, g.shape, vg.Points(3.5)
		pl.Add(sc)
		if i == 0 {
			pl.Legend.Add(g.name, sc)
		}
	}
	// The axis spans the parameter's range, whatever the trials drew: the
	// panels of sweeps with one point or many read alike, and a log axis
	// never reaches 0 (gonum widens an axis of one point by ±1).
	pl.X.Min, pl.X.Max = axisRange(p, pl.X.Min, pl.X.Max)
	pl.Legend.Top = true
	// Room above the points for the legend, which gonum draws inside
	// the axes (the same on every panel, so their scales match).
	span := pl.Y.Max - pl.Y.Min
	if span <= 0 {
		span = math.Max(math.Abs(pl.Y.Max), 1)
	}
	pl.Y.Max += 0.3 * span
	return pl, nil
}

// axisRange is the x axis of parameter p, given the data's lo and hi: a
// choice's positions with half a step either side, else p's range, and
// for a log axis a range above 0 wide enough to draw (a decade each side
// of a range of one value).
func axisRange(p Param, lo, hi float64) (float64, float64) {
	if p.Kind == "choice" {
		return -0.5, float64(len(p.Choices)) - 0.5
	}
	lo, hi = math.Min(lo, p.Low), math.Max(hi, p.High)
	if p.Kind == "int" {
		lo, hi = lo-0.5, hi+0.5
	}
	if p.Kind != "loguniform" && !p.Log {
		if !(hi > lo) {
			lo, hi = lo-1, hi+1
		}
		return lo, hi
	}
	if !(hi > 0) {
		hi = 1
	}
	if !(lo > 0) {
		lo = hi / 1000
	}
	if hi/lo < 1.0001 {
		lo, hi = lo/10, hi*10
	}
	return lo, hi
}

// logTicks marks a log axis at 1 to 9 times each power of ten within
// it and labels the powers of ten, or, where fewer than two are within,
// 1, 2 and 5 times them, or else gonum's linear ticks. gonum's LogTicks
// labels the powers alone and, below 1, starts a decade late (int
// truncates toward zero): lr 1e-3 to 9e-3 had no label at all.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi > lo) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	k0, k1 := int(math.Floor(math.Log10(lo)+1e-9)), int(math.Ceil(math.Log10(hi)-1e-9))
	for _, labelled := range [][]int{{1}, {1, 2, 5}} {
		var ticks []plot.Tick
		n := 0
		for k := k0; k <= k1; k++ {
			for m := 1; m <= 9; m++ {
				v, _ := strconv.ParseFloat(fmt.Sprintf("%de%d", m, k), 64) // exact, unlike m·10^k
				if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
					continue
				}
				tk := plot.Tick{Value: v}
				for _, l := range labelled {
					if m == l {
						tk.Label = strconv.FormatFloat(v, 'g', -1, 64)
						n++
					}
				}
				ticks = append(ticks, tk)
			}
		}
		if n >= 2 {
			return ticks
		}
	}
	return plot.DefaultTicks{}.Ticks(lo, hi)
}

func paramX(p Param, v string) (float64, bool) {
	if p.Kind == "choice" {
		for k, c := range p.Choices {
			if c == v {
				return float64(k), true
			}
		}
		return 0, false
	}
	x, err := strconv.ParseFloat(v, 64)
	return x, err == nil
}
