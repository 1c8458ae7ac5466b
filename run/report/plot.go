package report

import (
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"pipe/run"
	"pipe/run/folder"
)

// Colours of the loss curve.
var (
	stepColor  = color.RGBA{R: 160, G: 190, B: 230, A: 255}
	trainColor = color.RGBA{R: 31, G: 92, B: 170, A: 255}
	valColor   = color.RGBA{R: 214, G: 95, B: 30, A: 255}
)

// LossCurve draws the run's losses against the optimizer step as a PNG:
// every step's training loss (thin), each epoch's mean training loss and
// its validation loss (points joined by lines), written atomically to
// path. It draws nothing and returns nil when no step was trained.
func LossCurve(res *run.Result, path string) error {
	if len(res.StepLosses) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: loss (model %s)", res.Pipeline, res.Model)
	p.X.Label.Text = "optimizer step"
	p.Y.Label.Text = "loss"
	p.Add(plotter.NewGrid())
	p.Legend.Top = true

	steps := make(plotter.XYs, 0, len(res.StepLosses))
	for i, l := range res.StepLosses {
		steps = append(steps, plotter.XY{X: float64(i + 1), Y: l})
	}
	line, err := plotter.NewLine(steps)
	if err != nil {
		return fmt.Errorf("loss curve: %w", err)
	}
	line.LineStyle.Color = stepColor
	line.LineStyle.Width = vg.Points(0.8)
	p.Add(line)
	p.Legend.Add("training loss per step", line)

	var train, val plotter.XYs
	for _, e := range res.EpochResults {
		if finite(e.TrainLoss) {
			train = append(train, plotter.XY{X: float64(e.Step), Y: e.TrainLoss})
		}
		if e.Val != nil && finite(e.Val.Loss) {
			val = append(val, plotter.XY{X: float64(e.Step), Y: e.Val.Loss})
		}
	}
	add := func(xys plotter.XYs, c color.Color, shape draw.GlyphDrawer, name string) error {
		if len(xys) == 0 {
			return nil
		}
		lp, sp, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("loss curve: %w", err)
		}
		lp.LineStyle.Color, lp.LineStyle.Width = c, vg.Points(1.5)
		sp.GlyphStyle.Color, sp.GlyphStyle.Shape, sp.GlyphStyle.Radius = c, shape, vg.Points(3)
		p.Add(lp, sp)
		p.Legend.Add(name, lp, sp)
		return nil
	}
	if err := add(train, trainColor, draw.CircleGlyph{}, "training loss per epoch"); err != nil {
		return err
	}
	if err := add(val, valColor, draw.BoxGlyph{}, valName(res)); err != nil {
		return err
	}
	wt, err := p.WriterTo(8*vg.Inch, 4.5*vg.Inch, "png")
	if err != nil {
		return fmt.Errorf("loss curve: %w", err)
	}
	return folder.WriteFileAtomic(path, func(w io.Writer) error {
		_, err := wt.WriteTo(w)
		return err
	})
}

func finite(v float64) bool { return v-v == 0 }

// valName names the validation curve after the source it was measured on.
func valName(res *run.Result) string {
	for _, e := range res.EpochResults {
		if e.Val != nil {
			return fmt.Sprintf("validation loss (%s, %s)", e.Val.Source, e.Val.Part)
		}
	}
	return "validation loss"
}
