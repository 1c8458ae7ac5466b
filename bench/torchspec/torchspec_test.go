package torchspec

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"pipe/lang/format"
	"pipe/stdlib"
)

// TestModels loads every model of bench/models as the ratios command
// does: each is formatted, plans for the CPU, and gives a spec whose
// nodes account for every parameter and whose data file holds every
// tensor it lists.
func TestModels(t *testing.T) {
	files, _ := filepath.Glob("../models/*.pipe")
	if len(files) < 3 {
		t.Fatalf("bench/models holds %d models; the comparison needs the MLP, the CNN and the U-Net", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := format.Source(src, format.WithLayers(stdlib.IsLayer)); err != nil || !bytes.Equal(got, src) {
				t.Errorf("%s is not formatted (pipe fmt -w %s): %v", f, f, err)
			}
			m, err := Load(f, 2)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			path, s, err := m.Write(dir)
			if err != nil {
				t.Fatal(err)
			}
			var sum int64
			for _, n := range s.Nodes {
				sum += n.Params
			}
			if sum != s.Params || s.Params != m.Graph.Params() || s.Params == 0 {
				t.Errorf("nodes hold %d parameters, the spec says %d, the graph %d", sum, s.Params, m.Graph.Params())
			}
			if s.Batch != int(m.Plan.BatchSize) || s.Threads != 2 || s.Check == nil {
				t.Errorf("batch %d (plan %d), threads %d, check %v", s.Batch, m.Plan.BatchSize, s.Threads, s.Check)
			}
			blob, err := os.ReadFile(filepath.Join(dir, s.Data))
			if err != nil {
				t.Fatal(err)
			}
			var total int64
			var names []string
			for _, r := range s.Tensors {
				if r.Offset != total {
					t.Errorf("%s at offset %d, want %d", r.Name, r.Offset, total)
				}
				total += numel(r.Shape)
				names = append(names, r.Name)
			}
			if int64(len(blob)) != 4*total {
				t.Errorf("the data file has %d bytes; the tensors need %d", len(blob), 4*total)
			}
			for _, want := range []string{"batch.x", "batch.y", "check.out"} {
				if !slices.Contains(names, want) {
					t.Errorf("no tensor %s in %v", want, names)
				}
			}
			js, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var back Spec
			if err := json.Unmarshal(js, &back); err != nil || back.Version != Version || len(back.Nodes) != len(s.Nodes) {
				t.Errorf("the spec does not read back: %v", err)
			}
		})
	}
}

// TestConcatOrder: the U-Net's concats read the skip first, as pipe's
// graph does, and the spec keeps that order for torch.cat.
func TestConcatOrder(t *testing.T) {
	m, err := Load("../models/unet_small.pipe", 1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Spec()
	if err != nil {
		t.Fatal(err)
	}
	cats := 0
	for _, n := range s.Nodes {
		if n.Op != "concat" {
			continue
		}
		cats++
		if len(n.Inputs) != 2 || s.Nodes[n.Inputs[0]].Op == "convtranspose" || s.Nodes[n.Inputs[1]].Op != "convtranspose" {
			t.Errorf("%s reads %v; want the skip, then the upsampled flow", n.Name, n.Inputs)
		}
	}
	if cats != 3 {
		t.Errorf("%d concats in a depth-3 U-Net", cats)
	}
}

// TestViTSpec: a vision transformer's ops (tokens, class token, position
// embedding, attention, token 0) go to the worker, attention with its
// heads.
func TestViTSpec(t *testing.T) {
	src := "pipeline s\nsource d synthetic { samples 64  shape [3, 32, 32]  classes 10 }\nmodel m {\n  input [3, 32, 32]\n  vit patch 16 dim 64 depth 1 heads 2 mlp_dim 128 classes 10\n}\ntrain { epochs 1  batch 8  loss cross_entropy }\n"
	f := filepath.Join(t.TempDir(), "s.pipe")
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Load(f, 1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Spec()
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]bool{}
	for _, n := range s.Nodes {
		ops[n.Op] = true
		if n.Op == "attention" && n.Args.Heads != 2 {
			t.Errorf("%s has args %v; want heads 2", n.Name, n.Args)
		}
	}
	for _, op := range []string{"tokens", "class_token", "pos_embed", "attention", "select_token"} {
		if !ops[op] {
			t.Errorf("the spec has no %s node", op)
		}
	}
}
