package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pipe/engine/native"

	"pipe/engine/costs"
	"pipe/internal/memrun"
	"pipe/internal/onnxtest"
	"pipe/internal/progtest"
	"pipe/lang"
	"pipe/planner"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/run/folder"
	"pipe/stdlib"
)

// exportBatch is each example's batch here: small, so that two steps and
// one evaluation batch take a second or two on two cores; the 256x256
// U-Net and the 224x224 ResNet-18 take 2.
var exportBatch = map[string]int64{"cells": 2, "pills": 2, "deeplab_olinda": 2}

// exportRewrite is what an example's file is changed for its small batch:
// pills' SGD at lr 0.1 is for 256 samples a step, and two steps of it on 2
// samples drive the ResNet-18's logits to about 1e8; the linear scaling
// rule (lr in proportion to the batch) gives about 1e-3 for 2.
var exportRewrite = map[string][2]string{"pills": {"sgd lr 0.1 ", "sgd lr 1e-3 "}}

// withEvaluate is what an example whose source has no split and whose
// file has no evaluate block is given, so that a run evaluates something:
// the source itself, from its first sample.
const withEvaluate = "\nevaluate { source %s }\n"

// TestExportedExamplesMatchOnnxruntime trains every example two steps on
// its real data (Fashion-MNIST and the Landsat scene and volume, which
// make data fetches; cells, pills and pharma on internal/fixtures) with
// the native engine, exports the checkpoint with pipe export, and takes
// the first batch that pipe run --skip-train --resume evaluates: the
// evaluate block's source, else the train source's validation part (the
// first tiles for a raster; the generator's input for a gan). On that
// batch:
//
//   - run.LoadTrained's Predict gives what the evaluation gave;
//   - onnxruntime gives what Predict gives, within onnxtest.Tolerance,
//     for the whole batch and for its first sample alone (the batch axis
//     is dynamic);
//   - the loss recomputed here from onnxruntime's outputs is the loss the
//     evaluation's Model.Eval gave, within 1e-5 relative.
//
// lowrank and panther, whose synthetic source has no split and whose
// file no evaluate block, are given one that reads their source, so
// that their run evaluates its first samples.
func TestExportedExamplesMatchOnnxruntime(t *testing.T) {
	ort := onnxtest.Runtime(t)
	fixedHost(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := memrun.Prepare(root, dir); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var table strings.Builder
	fmt.Fprintf(&table, "%-18s %5s %-27s %11s %10s %10s  %-24s %9s\n", "example", "batch", "first batch of", "|pred−eval|", "|ort−pred|", "tolerance", "loss (eval)", "rel. diff")
	for _, path := range examplePaths(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".pipe")
		t.Run(name, func(t *testing.T) {
			n := exportBatch[name]
			if n == 0 {
				n = 4
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			src, _ = memrun.Lowered(name, src, int(n))
			if r, ok := exportRewrite[name]; ok {
				if !bytes.Contains(src, []byte(r[0])) {
					t.Fatalf("%s no longer says %q", name, r[0])
				}
				src = bytes.Replace(src, []byte(r[0]), []byte(r[1]), 1)
			}
			file := filepath.Join(dir, name+".pipe")
			prog, p := planExample(t, file, src, n)
			if prog.Block("evaluate") == nil && prog.TrainSource().Field("split") == nil {
				src = append(src, fmt.Sprintf(withEvaluate, prog.TrainSource().Name())...)
				prog, p = planExample(t, file, src, n)
			}
			ckpt := filepath.Join(dir, "ckpt", name)

			// Two steps; the run stops there, before its final evaluation
			// and its prediction of a whole scene.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stop := run.Hooks{Step: func(s run.StepInfo) {
				if s.Step >= 2 {
					cancel()
				}
			}}
			res, ds := run.Run(ctx, p, progtest.Decoded(t, prog), stop, run.WithBackend(native.Backend{}), run.WithMaxSteps(2),
				run.WithCheckpointDir(ckpt), run.WithBase(dir))
			if ds.HasErrors() || res.Position.Step != 2 {
				t.Fatalf("run: %d steps trained\n%v", res.Position.Step, ds)
			}
			last := filepath.Join(ckpt, folder.LastCheckpoint)
			out := filepath.Join(dir, name+".onnx")
			if code, stdout, stderr := runPipe(t, "", "export", file, "--checkpoint", last, "--onnx", out); code != exitOK {
				t.Fatalf("pipe export: exit %d\n%s%s", code, stdout, stderr)
			}

			// The first batch of the evaluation that pipe run --skip-train
			// --resume does, and what the model gave for it.
			var ev run.EvalBatch
			ctx, cancel = context.WithCancel(context.Background())
			defer cancel()
			first := run.Hooks{Evaluated: func(b run.EvalBatch) {
				if ev.N == 0 {
					ev = b
					ev.X, ev.Y, ev.Mask, ev.Out = slices.Clone(b.X), slices.Clone(b.Y), slices.Clone(b.Mask), slices.Clone(b.Out)
				}
				cancel() // one batch is all this test reads
			}}
			_, ds = run.Run(ctx, p, progtest.Decoded(t, prog), first, run.WithBackend(native.Backend{}), run.WithResume(last), run.WithSkipTrain(),
				run.WithCheckpointDir(filepath.Join(dir, "ckpt-eval", name)), run.WithBase(dir))
			if ds.HasErrors() || ev.N == 0 {
				t.Fatalf("evaluation: %d samples seen\n%v", ev.N, ds)
			}

			tr, err := run.LoadTrained(p, progtest.Decoded(t, prog), last, native.Backend{}, ev.N, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			per := numel64(tr.Info.OutputShape)
			want := make([]float32, ev.N*per)
			if err := tr.Predict(ev.X, ev.N, want); err != nil {
				t.Fatal(err)
			}
			dEval := onnxtest.MaxDiff(want, ev.Out)
			if !(dEval <= 1e-6*max(1, onnxtest.Largest(ev.Out))) {
				t.Errorf("Predict and the evaluation differ by up to %.3g on the same samples", dEval)
			}

			in := numel64(tr.Info.InputShape)
			outs, dims := ort.Run(t, out,
				onnxtest.Batch{X: ev.X, N: ev.N, Shape: tr.Info.InputShape},
				onnxtest.Batch{X: ev.X[:in], N: 1, Shape: tr.Info.InputShape})
			for i, nb := range []int{ev.N, 1} {
				if wd := append([]int64{int64(nb)}, tr.Info.OutputShape...); !slices.Equal(dims[i], wd) {
					t.Fatalf("batch of %d: onnxruntime's output is %v, want %v", nb, dims[i], wd)
				}
			}
			d, tol := onnxtest.MaxDiff(outs[0], want), onnxtest.Tolerance(want)
			if !(d <= tol) {
				t.Errorf("onnxruntime and pipe differ by up to %.3g (tolerance %.3g)", d, tol)
			}
			if d1 := onnxtest.MaxDiff(outs[1], want[:per]); !(d1 <= onnxtest.Tolerance(want[:per])) {
				t.Errorf("the first sample alone: onnxruntime and pipe differ by up to %.3g", d1)
			}

			last1 := tr.Graph.Node(tr.Graph.Output).Op
			loss, err := lossOf(tr.Info.Loss, last1, outs[0], ev.Y, ev.Mask, ev.N, tr.Info.OutputShape, tr.Info.Target)
			if err != nil {
				t.Fatal(err)
			}
			rel := math.Abs(loss-ev.Loss) / math.Abs(ev.Loss)
			if !(rel <= 1e-5) {
				t.Errorf("the %s loss of onnxruntime's outputs is %.9g; the evaluation's Model.Eval gave %.9g (relative difference %.3g)", tr.Info.Loss, loss, ev.Loss, rel)
			}
			fmt.Fprintf(&table, "%-18s %5d %-27s %11.3g %10.3g %10.3g  %-24s %9.3g\n",
				name, ev.N, ev.Source+" ("+ev.Part+")", dEval, d, tol, fmt.Sprintf("%s %.6g", tr.Info.Loss, ev.Loss), rel)
		})
	}
	t.Logf("each example trained two steps, exported, and its first evaluation batch run through onnxruntime (%.0fs in all):\n%s",
		time.Since(start).Seconds(), table.String())
}

// planExample writes src to file and checks and plans it for the CPU at
// batch n.
func planExample(t *testing.T, file string, src []byte, n int64) (*lang.Program, *plan.Plan) {
	t.Helper()
	if err := os.WriteFile(file, src, 0o644); err != nil {
		t.Fatal(err)
	}
	f, ds := lang.Parse(file, src)
	prog, cds := lang.Check(f, stdlib.Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		t.Fatalf("check:\n%v", ds)
	}
	p, pds := planner.Plan(progtest.Decoded(t, prog), planner.WithCosts(costs.Engines()...), planner.WithSource(src), planner.WithHost(hostInfo()), planner.WithDevice("cpu"), planner.WithBatch(n))
	if p == nil || pds.HasErrors() {
		t.Fatalf("plan:\n%v", pds)
	}
	return prog, p
}

func numel64(s []int64) int {
	n := 1
	for _, d := range s {
		n *= int(d)
	}
	return n
}

// lossOf is the mean loss of n outputs (NCHW, in the target's units)
// against their targets y (in theirs, mask weighting each value; nil: all
// count), written here from the definitions in engine/native/loss.go rather
// than run through the engine: the model learnt a regression's targets
// standardised with ts, so both are standardised first; cross_entropy
// takes class indices (one per output position) or a probability per
// output; a model ending in softmax (cross_entropy) or sigmoid (bce)
// gives probabilities, whose loss is the one of the logits before them;
// dice is 1 − the mean over channels of (2·Σpt + 1)/(Σp + Σt + 1).
func lossOf(kind, last string, out, y, mask []float32, n int, shape []int64, ts *run.TargetScaling) (float64, error) {
	per := numel64(shape)
	k, s := per, 1
	if len(shape) > 1 {
		k, s = int(shape[0]), per/int(shape[0])
	}
	z := make([]float64, len(out))
	t := make([]float64, len(y))
	for i, v := range out {
		z[i] = float64(v)
	}
	for i, v := range y {
		t[i] = float64(v)
	}
	if ts != nil {
		c := len(ts.Mean)
		for _, v := range [][]float64{z, t} {
			for i := range v {
				j := i % per
				ch := 0
				if c > 1 && per%c == 0 {
					ch = j / (per / c)
				}
				v[i] = (v[i] - ts.Mean[ch]) / ts.Std[ch]
			}
		}
	}
	w := func(j int) float64 {
		if mask == nil {
			return 1
		}
		return float64(mask[j])
	}
	at := func(i, c, p int) int { return (i*k+c)*s + p }
	var sum, denom float64
	switch kind {
	case "cross_entropy":
		index := len(t) == n*s
		if !index && len(t) != n*per {
			return 0, fmt.Errorf("cross_entropy: %d targets for %d samples of %v", len(t), n, shape)
		}
		for i := range n {
			for p := range s {
				// -log softmax: from the logits, or from the
				// probabilities a softmax at the end gave.
				nll := func(c int) float64 {
					if last == "softmax" {
						return -math.Log(z[at(i, c, p)])
					}
					mx := math.Inf(-1)
					for c := range k {
						mx = math.Max(mx, z[at(i, c, p)])
					}
					var se float64
					for c := range k {
						se += math.Exp(z[at(i, c, p)] - mx)
					}
					return mx + math.Log(se) - z[at(i, c, p)]
				}
				if index {
					wt := w(i*s + p)
					sum += wt * nll(int(t[i*s+p]))
					denom += wt
					continue
				}
				wt := w(i*per + p)
				for c := range k {
					if tc := t[at(i, c, p)]; tc != 0 {
						sum += wt * tc * nll(c)
					}
				}
				denom += wt
			}
		}
	case "dice":
		var loss float64
		for c := range k {
			var pt, ps, tt float64
			for i := range n {
				for p := range s {
					j := at(i, c, p)
					pv := z[j]
					if last != "sigmoid" {
						pv = 1 / (1 + math.Exp(-pv))
					}
					pt += w(j) * pv * t[j]
					ps += w(j) * pv
					tt += w(j) * t[j]
				}
			}
			loss += (2*pt + 1) / (ps + tt + 1)
		}
		return 1 - loss/float64(k), nil
	case "mse", "mae", "bce":
		if len(t) != len(z) {
			return 0, fmt.Errorf("%s: %d targets for %d outputs", kind, len(t), len(z))
		}
		for j := range z {
			var v float64
			switch kind {
			case "mse":
				v = (z[j] - t[j]) * (z[j] - t[j])
			case "mae":
				v = math.Abs(z[j] - t[j])
			case "bce":
				if last == "sigmoid" {
					v = -(t[j]*math.Log(z[j]) + (1-t[j])*math.Log1p(-z[j]))
				} else {
					v = math.Max(z[j], 0) - z[j]*t[j] + math.Log1p(math.Exp(-math.Abs(z[j])))
				}
			}
			sum += w(j) * v
			denom += w(j)
		}
	default:
		return 0, fmt.Errorf("no definition here of loss %s", kind)
	}
	if denom == 0 {
		return 0, nil
	}
	return sum / denom, nil
}
