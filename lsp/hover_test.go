package lsp

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"pipe/lang/syntax"
	"pipe/stdlib"
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

// hoverAt hovers at the first "|" in src, which it removes, through the
// analysis (the planner is the graph's stand-in).
func hoverAt(t *testing.T, src string) string {
	t.Helper()
	i := strings.Index(src, "|")
	if i < 0 {
		t.Fatalf("no cursor in %q", src)
	}
	text := src[:i] + src[i+1:]
	a := testAnalyzer(t)
	an := a.plan(context.Background(), a.check("h.pipe", 1, text))
	if an.prog == nil {
		t.Fatalf("no program: %v", an.diags)
	}
	md := describeAt(stdlib.Schema(), an, i)
	if testing.Verbose() {
		t.Logf("%s\n%s\n", src, md)
	}
	if md == "" {
		if tok, ok := tokenAt(text, i); ok {
			md = describeWord(stdlib.Schema(), tok)
		}
	}
	return md
}

const hoverFile = `device mine { kind gpu  memory 24GiB  bandwidth 2TB/s  fp32 30TFLOPS }
device mine
source scene geotiff {
  path "scene.tif"
  tile 64x64 stride 48
  augment [flip_h, rot90]
}
model net {
  input [3, 224, 224]
  conv 32 k3 pad1 s2 -> relu
  upsample 2 mode bilinear
  resnet18 classes 20
}
model unet { input [3, 64, 64]  depth 4 }
train {
  model net
  epochs 1  batch auto(min 8 max 256)
  optimizer adam lr 1e-3
  loss cross_entropy
  metrics [accuracy, miou]
}
`

// TestHoverOnValuesAndArguments: every word after a field's or a layer's
// name says what it is, from the registry.
func TestHoverOnValuesAndArguments(t *testing.T) {
	tests := []struct {
		at   string // the text the cursor is put in, at its first occurrence
		want []string
	}{
		{"a|dam", []string{"**adam** — kind of optimizer, one of sgd, adam, adamw", "optimizer adam takes `lr`, `weight_decay`, `beta1`, `beta2`, `eps`.", "The optimizer and its settings."}},
		{"geo|tiff", []string{"**geotiff** — a kind of source", "Settings of a geotiff source", "`path` (required)", "`tile`"}},
		{"cla|sses 20", []string{"**classes** — argument of resnet18", "`classes`"}},
		{"2|0\n", []string{"**20** — classes of resnet18", "`classes`"}},
		{"dep|th 4", []string{"**depth** — argument of unet", "`depth`"}},
		{"k|3", []string{"**k3** — kernel 3: argument of conv, glued to its name", "`kernel` (k)"}},
		{"pa|d1", []string{"**pad1** — padding 1: argument of conv"}},
		{" s|2 ", []string{"**s2** — stride 2: argument of conv"}},
		{"24G|iB", []string{"**24GiB** — memory: 25,769,803,776 bytes (24.0 GiB)"}},
		{"2T|B/s", []string{"**2TB/s** — bandwidth: 2,000,000,000,000 bytes per second (1.8 TiB/s)"}},
		{"64|x64", []string{"**64x64** — tile: 64 × 64 = 4,096 pixels"}},
		{"22|4, 224]", []string{"**[3, 224, 224]** — input: 150,528 values a sample"}},
		{"bili|near", []string{"**bilinear** — mode of upsample, one of"}},
		{"rot|90", []string{"**rot90** — augment, one of flip_h, flip_v, rot90, crop"}},
		{"cross_|entropy", []string{"**cross_entropy** — loss, one of", "The loss minimised"}},
		{"mi|ou", []string{"**miou** — metrics, one of"}},
		{"m|in 8", []string{"**auto(min 8 max 256)** — batch: the planner decides, between 8 and 256"}},
		{"str|ide 48", []string{"**stride** — argument of tile"}},
		{"1e|-3", []string{"**1e-3** — lr of optimizer", "`lr`"}},
		{"sce|ne geotiff", []string{"**source scene** (geotiff)"}},
		{"device mi|ne\n", []string{"**mine** — name of device: a device block of this file"}},
		{"device mi|ne {", []string{"**device mine** — The device's name"}},
		{"30T|FLOPS", []string{"**30TFLOPS** — fp32: 30,000,000,000,000 FLOP per second"}},
	}
	for _, tt := range tests {
		i := strings.Index(hoverFile, strings.ReplaceAll(tt.at, "|", ""))
		if i < 0 {
			t.Fatalf("%q not in the file", tt.at)
		}
		src := hoverFile[:i] + tt.at + hoverFile[i+len(tt.at)-1:]
		md := hoverAt(t, src)
		for _, w := range tt.want {
			if !strings.Contains(md, w) {
				t.Errorf("hover on %q lacks %q:\n%s", tt.at, w, md)
			}
		}
	}
}

// TestHoverOnDeviceAndFromTheRegistry: a device profile says what it is,
// and words hovered before the analysis catches up are documented from
// the registry alone.
func TestHoverOnDeviceAndFromTheRegistry(t *testing.T) {
	md := hoverAt(t, "device a100-8|0gb\n")
	for _, w := range []string{"**a100-80gb** — name of device: built-in profile, NVIDIA A100 80GB SXM (HBM2e): 80.0 GiB of memory, 2039 GB/s", "bf16 312 TFLOP/s"} {
		if !strings.Contains(md, w) {
			t.Errorf("hover on a profile lacks %q:\n%s", w, md)
		}
	}
	md = hoverAt(t, "device cu|da:1\n")
	if !strings.Contains(md, "a GPU of this machine by its number") {
		t.Errorf("hover on cuda:1:\n%s", md)
	}
	s := stdlib.Schema()
	for word, want := range map[string]string{
		"adam":      "**adam** — a value of kind of d_optimizer; kind of optimizer",
		"geotiff":   "**geotiff** — a kind of source",
		"bilinear":  "**bilinear** — a value of mode of upsample",
		"h100-80gb": "**h100-80gb** — a device: built-in profile",
	} {
		if md := describeWord(s, syntax.Token{Kind: syntax.KindIdent, Text: word}); !strings.HasPrefix(md, want) {
			t.Errorf("describeWord(%q) = %q, want it to start with %q", word, md, want)
		}
	}
	if md := describeWord(s, syntax.Token{Kind: syntax.KindSize, Text: "224x224"}); md != "**224x224** — a size: 224 × 224 = 50,176 pixels" {
		t.Errorf("describeWord(224x224) = %q", md)
	}
}
