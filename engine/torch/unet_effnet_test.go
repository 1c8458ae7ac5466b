package torch

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/run"
)

// unetB4Landsat is the Landsat example (olinda.pipe: six bands to a DEM in
// metres) with a U-Net on an EfficientNet-B4 encoder, on 64×64 tiles at
// batch 2. No augmentation and no activation checkpointing: the first
// batch is the same tiles on both engines, and nothing else differs.
const unetB4Landsat = `pipeline unet_b4_landsat
seed 1
source scene geotiff {
  path             "SCENE"
  bands            [1, 2, 3, 4, 5, 6]
  target           "DEM"
  target_normalize standard
  tile             64x64 stride 64
  split            0.8 seed 7
  normalize        per_band
}
model unet {
  input   [6, 64, 64]
  encoder efficientnet_b4
  depth   5
  width   16
  out     1
}
train { epochs 1  batch 2  optimizer adamw lr 1e-3  loss mse  checkpoint none }
`

// minBNValues is the fewest values per channel a training batchnorm may
// normalise over here. It centres x − μ: the engines' float32 differences
// in x (relative, about u times the layers before) become relative
// differences u·|μ|/σ of the centred values. Over m ≥ 8 values (the
// deepest 2×2 map at batch 2) σ spreads over positions and samples and
// |μ|/σ is of order 1, so lossTol, which the other models' first losses
// meet (summation order alone), holds. Over m = 2 (a 1×1 map at batch 2,
// as 32×32 tiles give) σ = |x₁ − x₂|/2 has no floor and neither has the
// amplification: the first losses differed by 1.5e-5 on synthetic 32×32
// tiles and by 1e-2 on the scene's. docs/design/efficientnet.md.
const minBNValues = 8

// TestUNetEfficientNetB4OnLandsat: a U-Net EfficientNet-B4 trains on the
// Landsat scene (its first 64×64 training tiles, normalised per band, the
// DEM standardised) on both engines from pipe's initial weights, and the
// first losses agree within lossTol, as the examples' do
// (TestExamplesOnBothEngines).
func TestUNetEfficientNetB4OnLandsat(t *testing.T) {
	py := testPython(t)
	scene, err := filepath.Abs("../../data/L7_ETMs.tif")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(scene); err != nil {
		t.Skip("the Landsat scene is not in data/ (make data fetches it)")
	}
	dem := filepath.Join(filepath.Dir(scene), "olinda_dem_utm25s.tif")
	src := strings.NewReplacer("SCENE", scene, "DEM", dem).Replace(unetB4Landsat)
	_, p, g := loadSrc(t, "unet_b4_landsat.pipe", []byte(src))
	fewest := int64(math.MaxInt64)
	for _, n := range g.Nodes {
		if n.Op == "batchnorm" {
			m := p.BatchSize
			for _, d := range n.Out[1:] {
				m *= d
			}
			fewest = min(fewest, m)
		}
	}
	if fewest < minBNValues {
		t.Fatalf("a batchnorm normalises over %d values a channel; the bound holds from %d", fewest, minBNValues)
	}
	var losses []float64
	for _, engine := range []string{"native", "torch"} {
		ctx, cancel := context.WithCancel(context.Background())
		stop := run.Hooks{Step: func(run.StepInfo) { cancel() }} // the first step is all this test reads
		res, ds := runJob(t, src, engine, t.TempDir(), py, ctx, stop, run.WithMaxSteps(1), run.WithThreads(2))
		cancel()
		if ds.HasErrors() || len(res.StepLosses) != 1 {
			t.Fatalf("%s: %d losses\n%v", engine, len(res.StepLosses), ds)
		}
		losses = append(losses, res.StepLosses[0])
	}
	d := math.Abs(losses[1]-losses[0]) / math.Abs(losses[0])
	if !(d <= lossTol) {
		t.Errorf("first loss native %.9g, torch %.9g: relative difference %.3g > %.0e", losses[0], losses[1], d, lossTol)
	}
	t.Logf("first loss native %.9g, torch %.9g, relative difference %.3g; the fewest values a batchnorm normalises over: %d",
		losses[0], losses[1], d, fewest)
}
