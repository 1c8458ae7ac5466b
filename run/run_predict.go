package run

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"pipe/run/folder"
	"slices"
	"strconv"

	"pipe/dataset"
	"pipe/spec"
)

// Predicting. predict { source S  write "path"  overlap f  batch n }
// runs the trained model over source S (train's source when it says none;
// all of its samples, whatever its split): a geotiff source in overlapping
// windows blended into a float32 GeoTIFF on the scene's grid (finer for a
// super-resolution source), a volume or zarr source likewise into a Zarr
// array (run_predict3d.go), and any other source into a CSV, one row per
// sample.
//
// What each writes: docs/design/prediction.md.

const maxCSVOutputs = 4096

func (r *runner) predict(ctx context.Context) {
	pb := r.spec.Predict
	if pb == nil {
		return
	}
	if !pb.At.Has("write") {
		at := pb.At.KindRange
		r.warnf(&at, CodePredict, "predict writes nothing", `predict has no write field; give one: write "out/predictions.csv".`)
		return
	}
	path := resolve(r.rc.base, pb.Write)
	src := r.data.trainSrc
	if pb.Source != "" {
		src = r.spec.Source(pb.Source)
		if src == nil {
			r.errorf(pb.At.Field("source"), CodePredict, "no such source", "predict reads source %s, but the file declares no source of that name.", pb.Source)
			return
		}
	}
	var ds dataset.Dataset
	if src == r.data.trainSrc {
		ds = r.data.split.All
	} else {
		var ok bool
		if ds, ok = r.open(src); !ok {
			return
		}
	}
	batch := int(r.p.BatchSize)
	if bv := pb.Batch; bv != nil {
		batch = int(*bv)
	}
	var (
		pred *Prediction
		err  error
	)
	if vol, ok := ds.(dataset.Volume); ok {
		overlap := 0.5
		if ov := pb.Overlap; ov != nil {
			overlap = *ov
		}
		pred, err = r.predictVolume(ctx, vol, src, path, overlap, batch)
	} else if raster, ok := ds.(dataset.Raster); ok && src.Kind == spec.KindGeoTIFF {
		// Half-overlapping windows, blended, leave no seams at window
		// edges; overlap 0 tiles the scene edge to edge.
		overlap := 0.5
		if ov := pb.Overlap; ov != nil {
			overlap = *ov
		}
		pred, err = r.predictRaster(ctx, raster, src, path, overlap, batch)
	} else {
		if !r.checkInput(ds, src) {
			return
		}
		pred, err = r.predictCSV(ctx, ds, src, path, batch)
	}
	if err != nil {
		if ctx.Err() != nil {
			r.res.Status = StatusInterrupted
			return
		}
		r.errorf(pb.At.Field("write"), CodePredict, "predict failed", "%v.", err)
		return
	}
	r.res.Predictions = append(r.res.Predictions, *pred)
	r.log.Info("predictions written", "path", path, "samples", pred.Samples)
}

func (r *runner) predictRaster(ctx context.Context, raster dataset.Raster, src *spec.Source, path string, overlap float64, batch int) (*Prediction, error) {
	in, out := r.graph.Input, r.model.OutShape()
	if len(in) != 3 || in[1] != in[2] {
		return nil, fmt.Errorf("predicting on geotiff source %s cuts square windows the size of the model's input, but model %s takes %s; give it an input [C, N, N]",
			src.Name, r.mspec.Name, shapeString(in))
	}
	if xs := raster.XShape(); xs[0] != in[0] {
		return nil, fmt.Errorf("source %s has %d bands but model %s takes %d channels", src.Name, xs[0], r.mspec.Name, in[0])
	}
	// A super-resolution source (downsample f) trained the model on
	// inputs f times coarser than the scene: predict feeds it the scene
	// itself and writes its output on a grid f times finer.
	f := 1
	if sr, ok := raster.(dataset.SuperResolution); ok {
		f = sr.Factor()
	}
	if len(out) != 3 || out[1] != in[1]*int64(f) || out[2] != in[2]*int64(f) {
		if f > 1 {
			return nil, fmt.Errorf("source %s downsamples by %d, so predict writes the model's output on a grid %d times finer than the scene's, which needs an output [K, %d, %d] for an input [C, %d, %d]; model %s outputs %s",
				src.Name, f, f, in[1]*int64(f), in[2]*int64(f), in[1], in[2], r.mspec.Name, shapeString(out))
		}
		return nil, fmt.Errorf("a prediction on a raster needs an output per pixel, [K, %d, %d]; model %s outputs %s", in[1], in[2], r.mspec.Name, shapeString(out))
	}
	grid := raster.Grid()
	tile := int(in[1])
	wins := dataset.Windows(grid.Width, grid.Height, tile, int(math.Round(overlap*float64(tile))))
	ws := dataset.WindowSet(raster, wins)
	fine := grid
	if f > 1 {
		ws = dataset.InputWindowSet(raster, wins)
		fine = grid.Finer(f)
	}
	bands := int(out[0])
	blend := dataset.NewBlender(fine.Width, fine.Height, bands)
	err := r.eachOutput(ctx, ws, batch, int(numel(out)), func(i int, y []float32) error {
		w := wins[i]
		return blend.Add(dataset.Window{X: w.X * f, Y: w.Y * f, W: w.W * f, H: w.H * f}, y)
	})
	if err != nil {
		return nil, err
	}
	pred := blend.Result()
	if s := r.data.scaling; s != nil {
		s.restore(pred, 1, len(pred)) // back to the target's units
	}
	plane := fine.Width * fine.Height
	nan := float32(math.NaN())
	for p := range plane {
		if !raster.Valid(p%fine.Width/f, p/fine.Width/f) {
			for k := range bands {
				pred[k*plane+p] = nan
			}
		}
	}
	if err := dataset.WritePrediction(path, fine, bands, pred); err != nil {
		return nil, err
	}
	return &Prediction{Source: src.Name, Path: path, Format: "geotiff", Samples: len(wins)}, nil
}

func (r *runner) predictCSV(ctx context.Context, ds dataset.Dataset, src *spec.Source, path string, batch int) (*Prediction, error) {
	out := r.model.OutShape()
	o := int(numel(out))
	if o > maxCSVOutputs {
		return nil, fmt.Errorf("model %s outputs %s (%d values) per sample, too many for a CSV of predictions; predict per-pixel outputs from a geotiff source",
			r.mspec.Name, shapeString(out), o)
	}
	root, _ := dataset.Root(ds, 0)
	var names []string
	if cn, ok := root.(dataset.ClassNamer); ok {
		names = cn.ClassNames()
	}
	loss, last := r.cfg.Loss.Kind, r.lastOp()
	classify := loss == "cross_entropy" && len(out) == 1 && o > 1
	binary := (loss == "bce" || loss == "dice") && o == 1
	withTarget := numel(ds.YShape()) == 1
	header := []string{"index"}
	namer, _ := root.(dataset.SampleNamer)
	if namer != nil {
		header = append(header, "file")
	}
	switch {
	case classify:
		header = append(header, "class")
		if len(names) > 0 {
			header = append(header, "name")
		}
		header = append(header, "probability")
	case binary:
		header = append(header, "probability", "class")
	case o == 1:
		header = append(header, "prediction")
	default:
		for i := range o {
			header = append(header, fmt.Sprintf("out_%d", i))
		}
	}
	if withTarget {
		header = append(header, "target")
	}
	loader := dataset.NewLoader(ds, dataset.LoaderOptions{BatchSize: batch, Workers: r.p.Loader.Workers, Prefetch: r.p.Loader.Prefetch})
	buf := make([]float32, batch*o)
	count := 0
	write := func(w io.Writer) error {
		cw := csv.NewWriter(w)
		it := loader.EpochContext(ctx, 0)
		defer it.Close()
		if err := cw.Write(header); err != nil {
			return err
		}
		row := make([]string, 0, len(header))
		for {
			b, err := it.Next(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			eb := *b
			eb.Y, eb.Mask = nil, nil
			if _, err := r.eval(&eb, buf[:b.N*o]); err != nil {
				it.Release(b)
				return err
			}
			for j := range b.N {
				z := buf[j*o : (j+1)*o]
				_, idx := dataset.Root(ds, b.Indices[j])
				row = append(row[:0], strconv.Itoa(idx))
				if namer != nil {
					row = append(row, namer.SampleName(idx))
				}
				switch {
				case classify:
					c := argmax(z)
					row = append(row, strconv.Itoa(c))
					if len(names) > 0 {
						name := ""
						if c < len(names) {
							name = names[c]
						}
						row = append(row, name)
					}
					pr := float64(z[c])
					if last != "softmax" {
						pr = softmaxAt(z, c)
					}
					row = append(row, fmtFloat(pr))
				case binary:
					pr := float64(z[0])
					if last != "sigmoid" {
						pr = 1 / (1 + math.Exp(-pr))
					}
					row = append(row, fmtFloat(pr), strconv.Itoa(b2i(pr >= 0.5)))
				default:
					for _, v := range z {
						row = append(row, fmtFloat(float64(v)))
					}
				}
				if withTarget {
					row = append(row, fmtFloat(float64(b.Y[j])))
				}
				if err := cw.Write(row); err != nil {
					it.Release(b)
					return err
				}
				count++
			}
			it.Release(b)
		}
		cw.Flush()
		return cw.Error()
	}
	if err := folder.WriteFileAtomic(path, write); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Prediction{Source: src.Name, Path: path, Format: "csv", Samples: count}, nil
}

func argmax(z []float32) int {
	bi := 0
	for i, v := range z {
		if v > z[bi] {
			bi = i
		}
	}
	return bi
}

func softmaxAt(z []float32, c int) float64 {
	mx := float64(slices.Max(z))
	var s float64
	for _, v := range z {
		s += math.Exp(float64(v) - mx)
	}
	return math.Exp(float64(z[c])-mx) / s
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', 7, 64) }

// eachOutput runs the model over every sample of ds in batches of batch,
// through a loader with the plan's workers, and hands each sample's
// output (o values) to add with the sample's index in ds.
func (r *runner) eachOutput(ctx context.Context, ds dataset.Dataset, batch, o int, add func(i int, y []float32) error) error {
	buf := make([]float32, batch*o)
	loader := dataset.NewLoader(ds, dataset.LoaderOptions{BatchSize: batch, Workers: r.p.Loader.Workers, Prefetch: r.p.Loader.Prefetch})
	it := loader.EpochContext(ctx, 0)
	defer it.Close()
	for {
		b, err := it.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		eb := *b
		eb.Y, eb.Mask = nil, nil
		if _, err := r.eval(&eb, buf[:b.N*o]); err != nil {
			it.Release(b)
			return err
		}
		for j := range b.N {
			if err := add(b.Indices[j], buf[j*o:(j+1)*o]); err != nil {
				it.Release(b)
				return err
			}
		}
		it.Release(b)
	}
}
