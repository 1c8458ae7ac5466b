package views

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"pipe/planner"
	"pipe/planner/plan"
)

// DevicesJSON writes the devices as indented JSON.
func DevicesJSON(w io.Writer, devs []plan.Device) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(devs)
}

// Devices prints the devices as a table, with what the rates mean.
func Devices(w io.Writer, devs []plan.Device) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tMEMORY\tBANDWIDTH\tFP32\tTF32\tFP16\tBF16\tBF16?\tTF32?\tFROM")
	for _, d := range devs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Name, d.Kind, planner.FormatBytes(d.Memory),
			rate(d.Bandwidth, "B/s"), rate(d.FP32, "FLOP/s"), rate(d.TF32, "FLOP/s"), rate(d.FP16, "FLOP/s"), rate(d.BF16, "FLOP/s"),
			yes(d.HasBF16), yes(d.HasTF32), d.Origin)
	}
	tw.Flush()
	for _, d := range devs {
		if d.Kernels != "" {
			fmt.Fprintf(w, "\n%s runs the native engine's products on %s.\n", d.Name, d.Kernels)
		}
	}
	fmt.Fprintln(w, "\nRates are peak dense figures (tensor cores for TF32, FP16 and BF16); - means unsupported.")
	fmt.Fprintln(w, "Local memory is what is free now; a profile's is its capacity.")
}

// rate renders a decimal rate: 2.04 TB/s, 312 TFLOP/s, or - for 0.
func rate(v float64, unit string) string {
	switch {
	case v == 0:
		return "-"
	case v >= 1e12:
		return fmt.Sprintf("%.3g T%s", v/1e12, unit)
	case v >= 1e9:
		return fmt.Sprintf("%.3g G%s", v/1e9, unit)
	}
	return fmt.Sprintf("%.3g M%s", v/1e6, unit)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
