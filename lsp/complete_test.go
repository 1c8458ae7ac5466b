package lsp

import (
	"slices"
	"strings"
	"testing"

	"pipe/stdlib"
)

// completeAt completes at the "|" in src.
func completeAt(t *testing.T, src string) []string {
	t.Helper()
	i := strings.Index(src, "|")
	if i < 0 {
		t.Fatalf("no cursor in %q", src)
	}
	text := src[:i] + src[i+1:]
	list := complete(stdlib.Schema(), text, newMapper(text).position(i))
	var labels []string
	for _, it := range list.Items {
		labels = append(labels, it.Label)
	}
	return labels
}

func TestCompleteByContext(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		want, not []string
	}{
		{"top level", "|", []string{"source", "model", "train", "pipeline", "precision"}, []string{"epochs", "conv"}},
		{"top level, typing", "pipeline p\nmo|", []string{"model"}, []string{"epochs"}},
		{"train body", "train {\n  |\n}", []string{"epochs", "batch", "optimizer"}, []string{"conv", "source ", "images"}},
		{"train body, one line", "train { epochs 5  |}", []string{"batch", "optimizer"}, []string{"conv"}},
		{"optimizer kind", "train { optimizer |", []string{"adam", "sgd", "adamw"}, []string{"epochs", "lr"}},
		{"optimizer args", "train { optimizer adam |", []string{"lr", "weight_decay", "beta1", "epochs"}, []string{"adam", "conv"}},
		{"sgd's args", "train { optimizer sgd |", []string{"lr", "momentum", "nesterov", "weight_decay"}, []string{"beta1", "beta2", "eps"}},
		{"adam's args", "train {\n  optimizer adam lr 1e-3 |\n}", []string{"beta1", "beta2", "eps", "weight_decay"}, []string{"momentum", "nesterov"}},
		{"adamw's args", "train { optimizer adamw |", []string{"beta1"}, []string{"momentum", "nesterov"}},
		{"optimizer args, not twice", "train { optimizer adam lr 1e-3 |", []string{"weight_decay"}, []string{"lr"}},
		{"batch auto", "train {\n  batch |\n}", []string{"auto"}, []string{"conv"}},
		{"metrics list", "train { metrics [accuracy, |] }", []string{"accuracy", "mae", "f1"}, []string{"epochs"}},
		{"source kind", "source scene |", []string{"idx", "csv", "geotiff"}, []string{"path"}},
		{"source variant fields", "source scene geotiff {\n  |\n}", []string{"path", "bands", "tile"}, []string{"images", "epochs"}},
		{"idx variant fields", "source s idx {\n  im|\n}", []string{"images", "labels"}, []string{"bands"}},
		{"tile stride", "source s geotiff {\n  tile 64x64 |\n}", []string{"stride"}, []string{"tile"}},
		{"model start", "model m {\n  |\n}", []string{"input", "conv", "dense", "resnet18"}, []string{"epochs"}},
		{"after arrow", "model m {\n  conv 32 k3 -> |\n}", []string{"relu", "batchnorm"}, []string{"input", "kernel"}},
		{"layer args", "model m {\n  conv 32 |\n}", []string{"kernel", "stride", "padding", "groups"}, []string{"relu", "epochs"}},
		{"glued arg used", "model m {\n  conv 32 k3 |\n}", []string{"stride", "padding"}, []string{"kernel"}},
		{"upsample mode", "model m {\n  upsample 2 mode |\n}", []string{"nearest", "bilinear"}, []string{"relu"}},
		{"add label", "model m {\n  x = conv 8\n  conv 8 -> add |\n}", []string{"x"}, []string{"epochs"}},
		{"branch label", "model m {\n  x = conv 8\n  add(|)\n}", []string{"x"}, []string{"epochs"}},
		{"repeat body", "model m {\n  2 * (|)\n}", []string{"conv", "dense"}, []string{"input"}},
		{"family args", "model unet {\n  |\n}", []string{"depth", "width", "input"}, nil},
		{"family enum", "model unet {\n  encoder |\n}", []string{"resnet18", "plain"}, []string{"depth"}},
		{"device", "device mine { memory 8GiB bandwidth 1TB/s }\ndevice |", []string{"auto", "cpu", "a100-80gb", "mine"}, []string{"model"}},
		{"evaluate source", "source tr idx { images \"a\" }\nsource te idx { images \"b\" }\nevaluate { source | }", []string{"tr", "te"}, []string{"epochs"}},
		{"family arg set on an earlier line", "model unet {\n  depth 4\n  |\n}", []string{"width", "encoder", "conv"}, []string{"depth"}},
		{"family arg set on a later line", "model unet {\n  |\n  width 16\n}", []string{"depth", "encoder"}, []string{"width"}},
		{"family args on one line", "model unet {\n  depth 4 |\n}", []string{"width", "out", "encoder"}, []string{"depth", "conv"}},
		{"family args after a field", "model unet {\n  input [3, 64, 64]  depth 4 width 8 |\n}", []string{"out", "encoder"}, []string{"depth", "width"}},
		{"family enum after a field", "model unet {\n  input [3, 64, 64]  encoder |\n}", []string{"resnet18", "plain"}, []string{"depth"}},
		{"model field set", "model unet {\n  input [3, 64, 64]\n  |\n}", []string{"init", "depth"}, []string{"input"}},
		{"field set on another line", "train {\n  epochs 5\n  |\n  batch 4\n}", []string{"optimizer", "loss"}, []string{"epochs", "batch"}},
		{"top field set", "precision bf16\n|", []string{"seed", "model"}, []string{"precision"}},
		{"after an unclosed shape", "model m {\n  input [1, 28\n  con|\n}", []string{"conv", "dense"}, []string{"input"}},
		{"after an unclosed list", "train {\n  metrics [accur\n  epo|\n}", []string{"epochs", "batch"}, []string{"accuracy", "metrics"}},
		{"in an unclosed list", "train { metrics [accur|", []string{"accuracy", "miou"}, []string{"epochs"}},
		{"a list going on", "train {\n  metrics [accuracy,\n  |", []string{"miou"}, []string{"epochs"}},
		{"a list closed below", "train {\n  metrics [accuracy\n  |]\n}", []string{"miou"}, []string{"epochs"}},
		{"in a comment", "// mo|", nil, []string{"model"}},
		{"in a string", "source s csv { path \"mo|\" }", nil, []string{"model", "path"}},
		{"after a closed block", "train { epochs 1 }\n|", []string{"model", "evaluate"}, []string{"epochs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := completeAt(t, tt.src)
			for _, w := range tt.want {
				if !slices.Contains(got, w) {
					t.Errorf("missing %q in %v", w, got)
				}
			}
			for _, n := range tt.not {
				if slices.Contains(got, n) {
					t.Errorf("unexpected %q in %v", n, got)
				}
			}
		})
	}
}
