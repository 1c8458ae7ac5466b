package views

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"pipe/planner"
	"pipe/planner/plan"
)

// gan prints a gan-mode plan's discriminator: its layers and what it
// adds to the memory (included in the total above).
func gan(w io.Writer, p *plan.Plan) {
	g := p.GAN
	if g == nil {
		return
	}
	cond := ""
	if g.Conditional {
		cond = ", conditional on the generator's input"
	}
	fmt.Fprintf(w, "\nDiscriminator %s%s: %s parameters, %s FLOPs per sample forward; %s loss, %s lr %g\n",
		g.Discriminator, cond, planner.FormatCount(g.Parameters), planner.FormatCount(g.FLOPsPerSample), g.Adversarial,
		g.Optimizer.Kind, g.Optimizer.LR)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LINE\tNAME\tOP\tOUTPUT\tPARAMS\tACTIVATIONS")
	for _, l := range g.Layers {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", l.Line, l.Name, l.Op, shape(l.Out), planner.FormatCount(l.Params), planner.FormatBytes(l.ActivationBytes))
	}
	tw.Flush()
	m := g.Memory
	rows := [][2]string{
		{"parameters", planner.FormatBytes(m.Parameters)},
		{"gradients", planner.FormatBytes(m.Gradients)},
		{"optimizer state", planner.FormatBytes(m.Optimizer)},
		{"activations", planner.FormatBytes(m.Activations)},
		{"activation grads", planner.FormatBytes(m.ActivationGradients)},
		{"workspace", planner.FormatBytes(m.Workspace)},
		{"input batch", planner.FormatBytes(m.Input)},
		{"generator output", planner.FormatBytes(m.Fake)},
		{"input gradient", planner.FormatBytes(m.InputGradient)},
		{"total", planner.FormatBytes(m.Total)},
	}
	fmt.Fprintf(w, "Discriminator memory at batch %d (in the total above; the generator's activations stay kept while it runs)\n", p.BatchSize)
	for _, r := range rows {
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("  %-16s  %10s", r[0], r[1]), " "))
	}
}
