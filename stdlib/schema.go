package stdlib

import (
	"sort"

	"pipe/diag"
	"pipe/lang"
	"pipe/spec"
)

// Registry is the standard library as the checker, the planner, the editor
// and the docs see it: every top-level field, block, layer and family, with
// their arguments. It implements lang.Schema.
//
// Naming: a field's main argument is named after the field (train's
// "epochs 20" is Arg("epochs", "epochs")), except that "pipeline" and
// "device" name theirs "name", and "optimizer" and "schedule" name their
// algorithm "kind" (Arg("optimizer", "kind")).
type Registry struct {
	top    []*lang.FieldSpec
	blocks []*lang.BlockSpec
	layers []*lang.LayerSpec
	byName map[string]*lang.LayerSpec
}

// registry is built by ops.go's init, after the op descriptors.
var registry *Registry

// Schema returns the standard library's registry. It is shared and must
// not be modified.
func Schema() *Registry { return registry }

var _ lang.Schema = (*Registry)(nil)

func newRegistry() *Registry {
	r := &Registry{top: topFields(), blocks: blockSpecs(), byName: map[string]*lang.LayerSpec{}}
	r.addLayers()
	for _, l := range familySpecs() {
		r.layers = append(r.layers, l)
		r.byName[l.Name] = l
	}
	return r
}

// TopFields implements lang.Schema.
func (r *Registry) TopFields() []*lang.FieldSpec { return r.top }

// Block implements lang.Schema.
func (r *Registry) Block(name string) *lang.BlockSpec {
	for _, b := range r.blocks {
		if b.Name == name {
			return b
		}
	}
	return nil
}

// Blocks returns every block spec, in the order the docs list them.
func (r *Registry) Blocks() []*lang.BlockSpec { return r.blocks }

// BlockNames implements lang.Schema.
func (r *Registry) BlockNames() []string {
	out := make([]string, len(r.blocks))
	for i, b := range r.blocks {
		out[i] = b.Name
	}
	return out
}

// Layer implements lang.Schema. Aliases (global_avg_pool for gap) return
// the spec of the layer they stand for.
func (r *Registry) Layer(name string) *lang.LayerSpec { return r.byName[name] }

// IsLayer reports whether name is a layer or a family of the registry: the
// formatter's hint (format.WithLayers) for telling layer lines from fields.
func IsLayer(name string) bool { return registry.byName[name] != nil }

// Layers returns every layer and family spec: layers first, then
// families, each group in the order the docs list them.
func (r *Registry) Layers() []*lang.LayerSpec { return r.layers }

// LayerNames implements lang.Schema: every layer, alias and family name,
// sorted.
func (r *Registry) LayerNames() []string {
	out := make([]string, 0, len(r.byName))
	for n := range r.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// DeviceNames implements lang.Schema: "auto", "cpu" and the built-in
// profiles.
func (r *Registry) DeviceNames() []string { return deviceNames() }

// CheckModel implements lang.Schema by building the model's graph.
func (r *Registry) CheckModel(m *lang.Model) diag.Diagnostics {
	_, ds := BuildGraph(m)
	return ds
}

// PlanOnly reports whether a layer or family can be planned but not run:
// no engine has kernels for it yet.
func (r *Registry) PlanOnly(name string) bool { return planOnly[name] }

var planOnly = map[string]bool{}

// Argument constructors. Each returns a fresh spec so no two fields share
// one.

type argOpt func(*lang.ArgSpec)

func arg(name string, t lang.Type, doc string, opts ...argOpt) *lang.ArgSpec {
	a := &lang.ArgSpec{Name: name, Type: t, Doc: doc}
	for _, o := range opts {
		o(a)
	}
	return a
}

var (
	positional argOpt = func(a *lang.ArgSpec) { a.Positional = true }
	required   argOpt = func(a *lang.ArgSpec) { a.Required = true }
	auto       argOpt = func(a *lang.ArgSpec) { a.Auto = true }
	glued      argOpt = func(a *lang.ArgSpec) { a.Glued = true }
)

func enum(vals ...string) argOpt { return func(a *lang.ArgSpec) { a.Enum = vals } }
func elem(t lang.Type) argOpt    { return func(a *lang.ArgSpec) { a.Elem = t } }
func def(s string) argOpt        { return func(a *lang.ArgSpec) { a.Default = s } }
func alias(names ...string) argOpt {
	return func(a *lang.ArgSpec) { a.Aliases = names }
}

// enumFrom takes the names from names each time they are read: the
// engine field's are those the engines register as they start, after
// this schema is built (docs/design/engines.md).
func enumFrom(names func() []string) argOpt {
	return func(a *lang.ArgSpec) { a.EnumFrom = names }
}

// atLeast, above, atMost and below bound a number: [v, ...), (v, ...),
// (..., v] and (..., v).
func atLeast(v float64) argOpt { return func(a *lang.ArgSpec) { a.Min, a.MinOpen = lang.F(v), false } }
func above(v float64) argOpt   { return func(a *lang.ArgSpec) { a.Min, a.MinOpen = lang.F(v), true } }
func atMost(v float64) argOpt  { return func(a *lang.ArgSpec) { a.Max, a.MaxOpen = lang.F(v), false } }
func below(v float64) argOpt   { return func(a *lang.ArgSpec) { a.Max, a.MaxOpen = lang.F(v), true } }

func field(name, doc string, args ...*lang.ArgSpec) *lang.FieldSpec {
	return &lang.FieldSpec{Name: name, Doc: doc, Args: args}
}

func requiredField(name, doc string, args ...*lang.ArgSpec) *lang.FieldSpec {
	f := field(name, doc, args...)
	f.Required = true
	return f
}

// Enumerations shared by several fields.
var (
	precisions = []string{"fp32", "tf32", "fp16", "bf16"}
	augments   = []string{"flip_h", "flip_v", "rot90", "crop"}
	metrics    = []string{"accuracy", "miou", "mae", "rmse", "psnr", "f1"}
	losses     = []string{"cross_entropy", "bce", "mse", "dice", "mae"}
	optimizers = []string{"sgd", "adam", "adamw"}
	schedules  = []string{"constant", "cosine", "step", "linear"}
	sourceKind = []string{"idx", "csv", "images", "geotiff", "synthetic", "volume", "zarr"}
)

func topFields() []*lang.FieldSpec {
	return []*lang.FieldSpec{
		field("pipeline", "The pipeline's name; it defaults to the file's base name.",
			arg("name", lang.TName, "The pipeline's name.", positional, required)),
		field("device", "Where to run: auto, cpu, cuda:N, a built-in profile such as a100-80gb, or a device block of this file.",
			arg("name", lang.TName, "The device: auto | cpu | cuda:N | a profile name | a device block's name.", positional, required, auto, def("auto"))),
		field("precision", "The arithmetic precision of training; auto picks the fastest the device supports well.",
			arg("precision", lang.TEnum, "fp32 | tf32 | fp16 | bf16 (fp16 and bf16 are mixed precision with fp32 master weights).",
				positional, required, enum(precisions...), auto, def("auto"))),
		field("engine", "What computes: auto (native on the CPU, torch on a GPU), native (pipe's own CPU executor) or torch (PyTorch, driven by pipe, on GPUs or the CPU).",
			arg("engine", lang.TEnum, "auto | native | torch.", positional, required, enumFrom(spec.Engines), auto, def("auto"))),
		field("seed", "The seed of every random choice, for reproducible runs.",
			arg("seed", lang.TInt, "A non-negative integer.", positional, required, atLeast(0))),
	}
}

// Argument makers shared by several sources.
func splitField() *lang.FieldSpec {
	return field("split", "The fraction of samples used for training; the rest is held out for validation.",
		arg("split", lang.TFloat, "The training fraction, strictly between 0 and 1.", positional, required, above(0), below(1)),
		arg("seed", lang.TInt, "The seed of the shuffle that splits the samples.", atLeast(0)))
}

func normalizeField(kinds ...string) *lang.FieldSpec {
	return field("normalize", "How input values are scaled before training.",
		arg("normalize", lang.TEnum, "none (raw values), scale (to [0, 1]), standard (zero mean, unit variance over the training split).",
			positional, required, enum(kinds...), def(kinds[0])))
}

func augmentField() *lang.FieldSpec {
	return field("augment", "Random transforms applied to training samples (to masks and targets too).",
		arg("augment", lang.TList, "Any of flip_h, flip_v, rot90, crop.", positional, required, elem(lang.TEnum), enum(augments...)))
}

func pathField(doc string) *lang.FieldSpec {
	return requiredField("path", doc, arg("path", lang.TString, doc, positional, required))
}

func sourceVariants() map[string][]*lang.FieldSpec {
	v := map[string][]*lang.FieldSpec{
		"idx": {
			requiredField("images", "The IDX file of images (MNIST layout), optionally gzipped.",
				arg("images", lang.TString, "Path to the images file.", positional, required)),
			requiredField("labels", "The IDX file of labels, one byte per image, optionally gzipped.",
				arg("labels", lang.TString, "Path to the labels file.", positional, required)),
			normalizeField("scale", "none", "standard"),
			splitField(),
		},
		"csv": {
			pathField("The CSV file, one sample a row."),
			field("features", "The columns used as inputs, in order; all but the label when left out.",
				arg("features", lang.TList, "Column names.", positional, required, elem(lang.TName))),
			field("categorical", "The feature columns holding categories; each becomes a one-hot group.",
				arg("categorical", lang.TList, "Column names, each also in features.", positional, required, elem(lang.TName))),
			requiredField("label", "The column to predict.",
				arg("label", lang.TName, "A column name.", positional, required)),
			splitField(),
			normalizeField("standard", "none", "scale"),
			field("delimiter", "The character between columns.",
				arg("delimiter", lang.TString, "One character, such as \",\" or \";\".", positional, required, def(`","`))),
			field("header", "Whether the first row names the columns.",
				arg("header", lang.TBool, "true when the first row holds names.", positional, required, def("true"))),
		},
		"images": {
			pathField("A folder with one sub-folder of images per class, or the images of a segmentation set."),
			field("masks", "A folder of masks for segmentation, one per image with the same file name.",
				arg("masks", lang.TString, "Path to the masks folder.", positional, required)),
			field("resize", "The size every image (and mask) is resized to.",
				arg("resize", lang.TSize, "Height x width, such as 224x224.", positional, required)),
			field("channels", "The channels each image is read with: 3 for RGB, 1 for grayscale (microscopy, X-ray).",
				arg("channels", lang.TInt, "1 or 3.", positional, required, atLeast(1), atMost(3), def("3"))),
			splitField(),
			augmentField(),
			field("strict", "Whether an image that fails to decode stops the run; false skips and counts it.",
				arg("strict", lang.TBool, "true to stop at the first bad image.", positional, required, def("true"))),
			normalizeField("scale", "none", "standard"),
		},
		"geotiff": {
			pathField("The GeoTIFF scene whose bands are the inputs."),
			field("bands", "The bands used as input channels, 1-based as GDAL numbers them; all when left out.",
				arg("bands", lang.TList, "Band numbers, such as [1, 2, 3].", positional, required, elem(lang.TInt))),
			field("target", "A raster resampled onto the scene's grid whose values are the per-pixel targets.",
				arg("target", lang.TString, "Path to the target raster.", positional, required)),
			field("target_bands", "Bands of the same scene as the per-pixel targets, instead of a target raster (band-to-band translation, super-resolution); scaled per band as normalize scales the inputs.",
				arg("target_bands", lang.TList, "Band numbers, such as [4].", positional, required, elem(lang.TInt))),
			field("downsample", "Inputs at 1/factor of the tile's resolution (each factor x factor block averaged) against the full-resolution target_bands: super-resolution.",
				arg("downsample", lang.TInt, "At least 2; the tile must divide by it.", positional, required, atLeast(2))),
			field("target_normalize", "How a regression target (loss mse or mae) is scaled for training; metrics and predictions are in the target's units either way, and class or mask targets are never scaled.",
				arg("target_normalize", lang.TEnum, "standard (zero mean, unit variance over the valid pixels of the training tiles, kept in the run's checkpoints and report) | none (raw values).",
					positional, required, enum("standard", "none"), def("standard"))),
			field("tile", "The size of the tiles cut from the scene, and the step between them.",
				arg("tile", lang.TSize, "Tile height x width, such as 64x64.", positional, required),
				arg("stride", lang.TInt, "Pixels between the starts of neighbouring tiles; the tile size when left out.", atLeast(1))),
			field("split", "The fraction of tiles used for training, the rest held out for validation; overlapping tiles share pixels, so give blocks to keep validation pixels out of training.",
				arg("split", lang.TFloat, "The training fraction (of tiles, or of blocks with blocks), strictly between 0 and 1.", positional, required, above(0), below(1)),
				arg("seed", lang.TInt, "The seed of the shuffle that splits the tiles or blocks.", atLeast(0)),
				arg("blocks", lang.TInt, "Split by square blocks of this many pixels a side (at least the tile's): each block goes whole to training or to validation, and tiles straddling both are left out.", atLeast(1))),
			field("normalize", "How input values are scaled before training, with statistics over every valid pixel of the scene.",
				arg("normalize", lang.TEnum, "per_band (each band to zero mean, unit variance; standard is the same) | global (one mean and deviation over all bands) | none (raw values).",
					positional, required, enum("per_band", "none", "global", "standard"), def("per_band"))),
			augmentField(),
			field("nodata", "The value marking missing pixels; tiles and targets ignore them, and predictions are nodata there.",
				arg("nodata", lang.TFloat, "The no-data value; the file's own when left out.", positional, required)),
		},
		"synthetic": {
			requiredField("samples", "How many random samples to generate.",
				arg("samples", lang.TInt, "At least 1.", positional, required, atLeast(1))),
			requiredField("shape", "The shape of one sample.",
				arg("shape", lang.TShape, "Such as [1024] or [3, 32, 32].", positional, required)),
			field("classes", "The number of classes of the labels; leave out for a regression target.",
				arg("classes", lang.TInt, "At least 1.", positional, required, atLeast(1))),
			field("seed", "The seed of the generator.",
				arg("seed", lang.TInt, "A non-negative integer.", positional, required, atLeast(0))),
		},
	}
	for k, fs := range volumeSources() {
		v[k] = fs
	}
	return v
}

func trainFields() []*lang.FieldSpec {
	return []*lang.FieldSpec{
		requiredField("epochs", "Passes over the training set.",
			arg("epochs", lang.TInt, "At least 1.", positional, required, atLeast(1))),
		field("batch", "Samples per step on the device; auto picks the largest that fits on a GPU, and on the CPU the least from 32 whose estimated speed is within 10% of that.",
			arg("batch", lang.TInt, "At least 1, or auto(min A max B).", positional, required, atLeast(1), auto, def("auto"))),
		field("effective_batch", "Samples per optimizer update; gradient accumulation makes up the difference from batch.",
			arg("effective_batch", lang.TInt, "At least 1; the batch when left out.", positional, required, atLeast(1))),
		field("optimizer", "The optimizer and its settings.",
			arg("kind", lang.TEnum, "sgd | adam | adamw.", positional, required, enum(optimizers...), def("adam")),
			arg("lr", lang.TFloat, "The learning rate, greater than 0.", above(0), def("1e-3")),
			arg("momentum", lang.TFloat, "SGD's momentum, in [0, 1).", atLeast(0), below(1), def("0"), kinds("sgd")),
			arg("nesterov", lang.TBool, "Use Nesterov momentum (sgd).", def("false"), kinds("sgd")),
			arg("weight_decay", lang.TFloat, "L2 penalty (sgd, adam) or decoupled decay (adamw), at least 0.", atLeast(0), def("0 (adamw: 0.01)")),
			arg("beta1", lang.TFloat, "Adam's first-moment decay, in (0, 1).", above(0), below(1), def("0.9"), kinds(adams...)),
			arg("beta2", lang.TFloat, "Adam's second-moment decay, in (0, 1).", above(0), below(1), def("0.999"), kinds(adams...)),
			arg("eps", lang.TFloat, "Adam's denominator term, greater than 0.", above(0), def("1e-8"), kinds(adams...))),
		field("schedule", "How the learning rate changes over training.",
			arg("kind", lang.TEnum, "constant | cosine | step | linear.", positional, required, enum(schedules...), def("constant")),
			arg("warmup", lang.TInt, "Epochs of linear warm-up from 0, at least 0.", atLeast(0), def("0")),
			arg("every", lang.TInt, "Epochs between steps (step), at least 1; a third of the epochs when left out.", atLeast(1)),
			arg("gamma", lang.TFloat, "The factor applied at each step (step), in (0, 1].", above(0), atMost(1), def("0.1"))),
		field("loss", "The loss minimised; chosen from the data when left out.",
			arg("loss", lang.TEnum, "cross_entropy | bce | mse | dice | mae.", positional, required, enum(losses...))),
		field("metrics", "What is measured on the validation split after each epoch.",
			arg("metrics", lang.TList, "Any of accuracy, miou, mae, rmse, psnr, f1 (psnr: 10·log10(R²/MSE) in dB, R the range of the targets).", positional, required, elem(lang.TEnum), enum(metrics...))),
		field("checkpoint", "Gradient checkpointing: auto recomputes activations in the backward pass only where they would not fit, none never does, all recomputes as much as saves the most memory.",
			arg("checkpoint", lang.TEnum, "auto | none | all.", positional, required, enum("auto", "none", "all"), auto, def("auto"))),
		field("save", "Which checkpoint files a run writes: auto keeps the last and the best epoch, all also one per epoch, none writes none (and an interrupted run cannot resume).",
			arg("save", lang.TEnum, "auto | none | all.", positional, required, enum("auto", "none", "all"), auto, def("auto"))),
		field("checkpoint_dir", "The run's folder: its checkpoint files (written every epoch and on interrupt) and report. Given, every run of the file writes there, a fresh one replacing the earlier run's files; without it each run gets a new out/PIPELINE/runs/STAMP, which out/PIPELINE/latest names. A relative path resolves against the current directory.",
			arg("checkpoint_dir", lang.TString, "A folder path.", positional, required, def(`"out/PIPELINE/runs/STAMP"`))),
		field("fuse", "Whether adjacent ops are fused into one kernel; auto lets the planner decide.",
			arg("fuse", lang.TBool, "true, false or auto.", positional, required, auto, def("auto"))),
		field("sync_batchnorm", "With data parallelism, whether batchnorm's batch statistics are computed over every device's samples (all-reduced each step) instead of each device's own; auto does so when the batch a device is below 32.",
			arg("sync_batchnorm", lang.TBool, "true, false or auto.", positional, required, auto, def("auto"))),
		field("workers", "Data-loading threads; auto sizes them to the host.",
			arg("workers", lang.TInt, "At least 0 (0 loads on the training thread).", positional, required, atLeast(0), auto, def("auto"))),
		field("prefetch", "Batches loaded ahead of the one being trained on.",
			arg("prefetch", lang.TInt, "At least 1.", positional, required, atLeast(1), auto, def("auto"))),
		field("source", "The source to train on; the one named train, or the only one, when left out.",
			arg("source", lang.TName, "A source's name.", positional, required)),
		field("model", "The model to train; the only one when left out.",
			arg("model", lang.TName, "A model's name.", positional, required)),
		field("steps_per_epoch", "Cut each epoch to this many optimizer steps, a fresh shuffled part of the training data each epoch: short epochs for a sweep's trials or a quick look.",
			arg("steps_per_epoch", lang.TInt, "At least 1; every batch of the training data when left out.", positional, required, atLeast(1))),
		field("max_steps", "Stop after this many optimizer steps even if epochs remain.",
			arg("max_steps", lang.TInt, "At least 1.", positional, required, atLeast(1))),
		field("grad_clip", "Clip the global gradient norm to this value.",
			arg("grad_clip", lang.TFloat, "Greater than 0.", positional, required, above(0))),
		field("seed", "The seed of training's random choices (init, shuffle, dropout); the file's seed when left out.",
			arg("seed", lang.TInt, "A non-negative integer.", positional, required, atLeast(0))),
		field("memory_margin", "The fraction of device memory the planner keeps free.",
			arg("memory_margin", lang.TFloat, "In [0, 0.9].", positional, required, atLeast(0), atMost(0.9), def("0.1"))),
	}
}

func blockSpecs() []*lang.BlockSpec {
	return []*lang.BlockSpec{
		{Name: "source", Doc: "Where samples come from: a dataset on disk or a generator.",
			Labels: []*lang.LabelSpec{
				{Name: "name", Doc: "The source's name, for train and evaluate to refer to."},
				{Name: "kind", Enum: sourceKind, Doc: "idx | csv | images | geotiff | synthetic | volume | zarr."},
			},
			Variants: sourceVariants(), VariantLabel: 1},
		{Name: "model", Doc: "A network: an input shape and chains of layers, or a family's arguments.",
			Labels: []*lang.LabelSpec{{Name: "name", Doc: "The model's name; a family's name (unet, resnet18) makes the body that family's arguments."}},
			Body:   lang.BodyModel,
			Fields: []*lang.FieldSpec{
				field("input", "The shape of one sample, without the batch: [C, H, W] for images, [F] for vectors.",
					arg("input", lang.TShape, "Such as [3, 224, 224] or [5].", positional, required)),
				field("init", "How parameters are initialised.",
					arg("seed", lang.TInt, "The seed of the initialisation.", atLeast(0))),
			}},
		{Name: "train", Once: true, Doc: "How the model is trained.", Fields: append(trainFields(), ganTrainFields()...)},
		{Name: "evaluate", Once: true, Doc: "Measure the trained model on a source.",
			Fields: []*lang.FieldSpec{
				field("source", "The source to evaluate on; its validation split when it is the training source.",
					arg("source", lang.TName, "A source's name.", positional, required)),
				field("metrics", "What is measured; train's metrics when left out.",
					arg("metrics", lang.TList, "Any of accuracy, miou, mae, rmse, psnr, f1 (psnr: 10·log10(R²/MSE) in dB, R the range of the targets).", positional, required, elem(lang.TEnum), enum(metrics...))),
				field("batch", "Samples per step; auto picks the largest that fits.",
					arg("batch", lang.TInt, "At least 1, or auto.", positional, required, atLeast(1), auto, def("auto"))),
			}},
		{Name: "predict", Once: true, Doc: "Run the trained model over a source and write its outputs.",
			Fields: []*lang.FieldSpec{
				field("source", "The source to predict on.",
					arg("source", lang.TName, "A source's name.", positional, required)),
				field("write", "Where predictions are written; a GeoTIFF source writes a raster on its grid.",
					arg("write", lang.TString, "An output path.", positional, required)),
				field("overlap", "The fraction by which prediction windows over a raster overlap; overlaps are blended so windows leave no seams.",
					arg("overlap", lang.TFloat, "In [0, 1).", positional, required, atLeast(0), below(1), def("0.5"))),
				field("batch", "Samples per step; auto picks the largest that fits.",
					arg("batch", lang.TInt, "At least 1, or auto.", positional, required, atLeast(1), auto, def("auto"))),
				field("precision", "The arithmetic of inference: int8 runs conv and dense layers with weights quantised per output channel and activations per tensor (native engine, CPU).",
					arg("precision", lang.TEnum, "fp32 | int8.", positional, required, enum("fp32", "int8"), def("fp32"))),
				field("calibrate", "How many training batches int8 measures its activation ranges on.",
					arg("calibrate", lang.TInt, "At least 1.", positional, required, atLeast(1), def("8"))),
			}},
		serveBlock(),
		sweepBlock(),
		{Name: "device", Doc: "A device described by hand, for hardware without a built-in profile.",
			Labels: []*lang.LabelSpec{{Name: "name", Doc: "The device's name, for the device field to refer to."}},
			Fields: []*lang.FieldSpec{
				field("kind", "Whether the device is a GPU or a CPU.",
					arg("kind", lang.TEnum, "gpu | cpu.", positional, required, enum("gpu", "cpu"), def("gpu"))),
				requiredField("memory", "The device's memory.",
					arg("memory", lang.TBytes, "Such as 24GiB.", positional, required)),
				requiredField("bandwidth", "The device's peak memory bandwidth.",
					arg("bandwidth", lang.TBandwidth, "Such as 900GB/s.", positional, required)),
				field("fp32", "Peak dense fp32 rate.", arg("fp32", lang.TFlops, "Such as 19.5TFLOPS.", positional, required)),
				field("tf32", "Peak dense tf32 tensor rate; absent means unsupported.", arg("tf32", lang.TFlops, "Such as 156TFLOPS.", positional, required)),
				field("fp16", "Peak dense fp16 tensor rate; absent means unsupported.", arg("fp16", lang.TFlops, "Such as 312TFLOPS.", positional, required)),
				field("bf16", "Peak dense bf16 tensor rate; absent means unsupported.", arg("bf16", lang.TFlops, "Such as 312TFLOPS.", positional, required)),
				field("cores", "CPU cores (for a cpu device).", arg("cores", lang.TInt, "At least 1.", positional, required, atLeast(1))),
				field("host_memory", "The host's memory.", arg("host_memory", lang.TBytes, "Such as 128GiB.", positional, required)),
			}},
	}
}
