package lsp

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestShareOfReadsAsPercent: the device line of a hover says how much of
// the device the activations take in words a reader takes in at once.
func TestShareOfReadsAsPercent(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		part, whole int64
		want        string
	}{
		{112 * gib, 80 * gib, "140% of it, more than it holds"},
		{40 * gib, 80 * gib, "50% of it"},
		{80 * gib, 80 * gib, "100% of it"},
		{80*gib - 1, 80 * gib, "99.9% of it"},
		{80*gib + 1, 80 * gib, "100.1% of it, more than it holds"},
		{1 << 20, 80 * gib, "under 0.1% of it"},
		{2 * gib, 80 * gib, "2.5% of it"},
		{1200 * gib, 80 * gib, "15.0× what it holds"},
		{1 << 62, 1 << 30, "4,294,967,296× what it holds"},
		{0, 80 * gib, "0% of it"},
	}
	for _, tt := range tests {
		if got := shareOf(tt.part, tt.whole); got != tt.want {
			t.Errorf("shareOf(%d, %d) = %q, want %q", tt.part, tt.whole, got, tt.want)
		}
	}
}

// TestShareOfAgreesWithItsNumbers sweeps parts around a device's size and
// checks that the figure written is on the same side of 100% as the part
// is of the whole, and never in exponent notation.
func TestShareOfAgreesWithItsNumbers(t *testing.T) {
	num := regexp.MustCompile(`^(under )?([0-9][0-9,]*(?:\.[0-9]+)?)(%|×)`)
	exp := regexp.MustCompile(`\d[eE][+-]?\d`)
	whole := int64(80 << 30)
	var parts []int64
	for _, f := range []float64{1e-9, 1e-4, 0.00099, 0.001, 0.05, 0.0999, 0.1, 0.5, 0.8999, 0.9, 0.99, 0.999, 0.9999999,
		1.0000001, 1.001, 1.0999, 1.1, 1.4, 9.99, 10, 10.0001, 99.99, 100, 1e6, 1e9} {
		parts = append(parts, int64(f*float64(whole)))
	}
	parts = append(parts, 1, whole-1, whole, whole+1, 1<<62, 1<<63-1)
	for _, part := range parts {
		s := shareOf(part, whole)
		if exp.MatchString(s) {
			t.Errorf("shareOf(%d) = %q: exponent notation", part, s)
		}
		m := num.FindStringSubmatch(s)
		if m == nil {
			t.Errorf("shareOf(%d) = %q: no figure", part, s)
			continue
		}
		v, err := strconv.ParseFloat(strings.ReplaceAll(m[2], ",", ""), 64)
		if err != nil {
			t.Fatal(err)
		}
		if m[3] == "×" {
			v *= 100
		}
		switch {
		case part < whole && v >= 100, part > whole && v <= 100, part == whole && v != 100:
			t.Errorf("shareOf(%d, %d) = %q contradicts the numbers", part, whole, s)
		case part > 0 && v == 0 && m[1] == "":
			t.Errorf("shareOf(%d, %d) = %q: a part that is not 0 reads 0%%", part, whole, s)
		}
	}
}

// TestUnitsRoundUp: a value that rounds up to the next unit is written
// in that unit, so "1024.0 MiB" and "1000.0K" never appear.
func TestUnitsRoundUp(t *testing.T) {
	tests := []struct{ got, want string }{
		{bytesIEC(1<<30 - 1), "1.0 GiB"},
		{bytesIEC(1023), "1023 B"},
		{bytesIEC(1536), "1.5 KiB"},
		{bytesIEC(80 << 30), "80.0 GiB"},
		{count(999_999), "999,999 (1.0M)"},
		{count(11_689_512), "11,689,512 (11.7M)"},
		{count(9_999), "9,999"},
		{count(12_345), "12,345 (12.3K)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

// TestHoverDeviceLine: a layer whose activations exceed the device reads
// as a plain percentage in the hover.
func TestHoverDeviceLine(t *testing.T) {
	var b strings.Builder
	costs := &Costs{Device: "h100-80gb", DeviceMemory: 80 << 30, Precision: "bf16", Batch: 512}
	writeCosts(&b, costs, []int64{10}, 100, 112<<30, 1, true)
	md := b.String()
	if !strings.Contains(md, "- device: h100-80gb, 80.0 GiB (140% of it, more than it holds)") {
		t.Errorf("device line:\n%s", md)
	}
	if !strings.Contains(md, "activation memory: 112.0 GiB for a batch of 512") {
		t.Errorf("activation line:\n%s", md)
	}
}
