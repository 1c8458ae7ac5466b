package lang

import (
	"fmt"
	"strings"

	"pipe/diag"
)

// GAN is a train block in gan mode: a generator and a discriminator
// trained against each other. The generator is the model train trains,
// evaluates and predicts with; the discriminator exists only in training.
type GAN struct {
	Generator, Discriminator *Model
	// Conditional: the discriminator reads the generator's input
	// concatenated with the image along channels (Pix2Pix).
	Conditional bool
	// Adversarial is "bce", "lsgan" or "hinge"; AdvWeight its weight in the
	// generator's loss, L1 the weight of the L1 term.
	Adversarial string
	AdvWeight   float64
	L1          float64
	// DSteps is the update ratio: the discriminator steps on every batch,
	// the generator on every DSteps-th.
	DSteps int
	// DOptimizer is the discriminator's optimizer field; nil means
	// train's optimizer.
	DOptimizer *Field
	// Range is the mode field's.
	Range diag.Range
}

// ganOnly are train's fields that mean something only in gan mode.
var ganOnly = []string{"generator", "discriminator", "d_optimizer", "adversarial", "l1", "perceptual", "d_steps"}

// ganMode reports whether a train block says mode gan.
func ganMode(train *Block) bool {
	v := train.Arg("mode", "mode")
	return v != nil && v.Str == "gan"
}

// GAN returns train's gan settings, or nil when train is not in gan mode
// or its models cannot be resolved (the checker reports why).
func (p *Program) GAN() *GAN {
	train := p.Block("train")
	if train == nil || !ganMode(train) {
		return nil
	}
	g := &GAN{Adversarial: "bce", AdvWeight: 1, DSteps: 1, Range: train.Field("mode").Range}
	if v := train.Arg("discriminator", "discriminator"); v != nil {
		g.Discriminator = p.Model(v.Str)
	}
	if v := train.Arg("discriminator", "conditional"); v != nil {
		g.Conditional = v.Bool
	}
	if v := train.Arg("generator", "generator"); v != nil {
		g.Generator = p.Model(v.Str)
	} else if len(p.Models) == 2 && g.Discriminator != nil {
		for _, m := range p.Models {
			if m != g.Discriminator {
				g.Generator = m
			}
		}
	}
	if v := train.Arg("adversarial", "adversarial"); v != nil {
		g.Adversarial = v.Str
	}
	if v := train.Arg("adversarial", "weight"); v != nil {
		g.AdvWeight = v.Float
	}
	if v := train.Arg("l1", "l1"); v != nil {
		g.L1 = v.Float
	}
	if v := train.Arg("d_steps", "d_steps"); v != nil {
		g.DSteps = int(v.Int)
	}
	g.DOptimizer = train.Field("d_optimizer")
	if g.Generator == nil || g.Discriminator == nil {
		return nil
	}
	return g
}

// ModelShaper is an optional interface of a Schema: the input and output
// shapes of one sample of a model, for checks across models (a
// generator's output feeding its discriminator). ok is false when the
// model's own shapes do not check (already reported).
type ModelShaper interface {
	ModelShapes(m *Model) (in, out []int64, ok bool)
}

// gan checks a train block's gan settings: the fields only gan mode
// reads, the two models, and that the generator's output (with its input,
// when conditional) is what the discriminator reads.
func (c *checker) gan(p *Program, train *Block) {
	if !ganMode(train) {
		for _, name := range ganOnly {
			if f := train.Field(name); f != nil {
				c.errorf(f.NameRange, "gan-only", name+" needs mode gan",
					"%s is a setting of two models trained against each other; add mode gan to train, or remove it.", name)
			}
		}
		return
	}
	mode := train.Field("mode")
	if f := train.Field("perceptual"); f != nil {
		c.errorf(f.NameRange, "perceptual-unavailable", "no perceptual loss without a pretrained network",
			"A perceptual term compares features of a network pretrained on ImageNet (VGG), and pipe never downloads weights. Remove perceptual and weight the L1 term instead (l1 100).")
	}
	if f := train.Field("loss"); f != nil {
		c.errorf(f.NameRange, "gan-loss", "loss is not read in gan mode",
			"In gan mode the generator minimises the adversarial term plus the l1 term, and the discriminator the adversarial loss. Remove loss; set adversarial bce|lsgan|hinge and l1 WEIGHT.")
	}
	if f := train.Field("model"); f != nil {
		c.errorf(f.NameRange, "gan-model", "gan mode trains a generator",
			"Name the two models with generator NAME and discriminator NAME instead of model.")
	}
	var models []string
	for _, m := range p.Models {
		models = append(models, m.Name)
	}
	resolve := func(field string) *Model {
		f := train.Field(field)
		v := f.First()
		if v == nil {
			return nil
		}
		m := p.Model(v.Str)
		if m == nil {
			c.unknown(v.Range, "unknown-model", "model", v.Str, models, "declared in this file")
		}
		return m
	}
	d := resolve("discriminator")
	g := resolve("generator")
	if train.Field("discriminator") == nil {
		c.errorf(mode.Range, "no-discriminator", "gan mode needs a discriminator",
			"Add discriminator NAME to train, NAME a model whose input is the generator's output and whose outputs are logits (PatchGAN: a conv stack ending in conv 1 k4 pad1).")
		return
	}
	if d == nil {
		return
	}
	if train.Field("generator") == nil {
		if len(p.Models) != 2 {
			c.errorf(mode.Range, "no-generator", "which model is the generator",
				"The file declares %d models (%s); say which one generates with: generator NAME.", len(models), strings.Join(models, ", "))
			return
		}
		for _, m := range p.Models {
			if m != d {
				g = m
			}
		}
	}
	if g == nil {
		return
	}
	if g == d {
		c.errorf(train.Field("discriminator").Range, "gan-same-model", "the generator is its own discriminator",
			"generator and discriminator name the same model %s; declare a second model for the discriminator.", g.Name)
		return
	}
	shaper, ok := c.schema.(ModelShaper)
	if !ok {
		return
	}
	gin, gout, ok1 := shaper.ModelShapes(g)
	din, _, ok2 := shaper.ModelShapes(d)
	if !ok1 || !ok2 {
		return
	}
	want := gout
	cond := train.Arg("discriminator", "conditional")
	at := train.Field("discriminator").Range
	if cond != nil && cond.Bool {
		if len(gin) != 3 || len(gout) != 3 || gin[1] != gout[1] || gin[2] != gout[2] {
			c.errorf(cond.Range, "gan-shape", "a conditional discriminator needs input and output of one size",
				"conditional concatenates the generator's input %s with its output %s along channels, so both must be [C, H, W] of the same height and width. Remove conditional (ESRGAN's discriminator sees the image alone).",
				shapeString(gin), shapeString(gout))
			return
		}
		want = []int64{gin[0] + gout[0], gout[1], gout[2]}
	}
	if !sameShape(want, din) {
		what := fmt.Sprintf("the generator's output %s", shapeString(gout))
		if cond != nil && cond.Bool {
			what = fmt.Sprintf("the generator's input and output concatenated, %s", shapeString(want))
		}
		c.errorf(at, "gan-shape", "the discriminator does not read the generator's output",
			"Discriminator %s has input %s, but it reads %s. Set %s's input to %s.", d.Name, shapeString(din), what, d.Name, shapeString(want))
	}
}

func shapeString(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func sameShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
