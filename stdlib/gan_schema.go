package stdlib

import "pipe/lang"

// Adversarial losses a gan-mode train block offers.
var adversarials = []string{"bce", "lsgan", "hinge"}

// ganTrainFields are train's fields for two models trained against each
// other: the generator (train's model, its optimizer and schedule) and the
// discriminator with its own optimizer.
func ganTrainFields() []*lang.FieldSpec {
	var dopt []*lang.ArgSpec
	for _, f := range trainFields() {
		if f.Name == "optimizer" {
			dopt = f.Args
		}
	}
	return []*lang.FieldSpec{
		field("mode", "What training minimises: supervised (the loss against the source's targets) or gan (a generator and a discriminator trained against each other, Pix2Pix-style).",
			arg("mode", lang.TEnum, "supervised | gan.", positional, required, enum("supervised", "gan"), def("supervised"))),
		field("generator", "gan mode: the model trained to produce the targets from the inputs; predict and evaluate run it. The only model when left out and there are two.",
			arg("generator", lang.TName, "A model's name.", positional, required)),
		field("discriminator", "gan mode: the model trained to tell the source's targets from the generator's outputs; its outputs are logits (one, or a map of patches as in PatchGAN).",
			arg("discriminator", lang.TName, "A model's name.", positional, required),
			arg("conditional", lang.TBool, "The discriminator sees the input beside the image (concatenated along channels), as in Pix2Pix.", def("false"))),
		field("d_optimizer", "gan mode: the discriminator's optimizer; optimizer's settings when left out.", dopt...),
		field("adversarial", "gan mode: the adversarial loss on the discriminator's logits z, each the mean over every value: bce (the original GAN's: the discriminator minimises softplus(-z) on targets and softplus(z) on the generator's outputs, the generator softplus(-z)), lsgan (least squares: (z-1)² and z², the generator (z-1)²) or hinge (relu(1-z) and relu(1+z), the generator -z). The discriminator's loss is half on each.",
			arg("adversarial", lang.TEnum, "bce | lsgan | hinge.", positional, required, enum(adversarials...), def("bce")),
			arg("weight", lang.TFloat, "The adversarial term's weight in the generator's loss, at least 0.", atLeast(0), def("1"))),
		field("l1", "gan mode: the weight of the L1 distance between the generator's output and the target in the generator's loss (Pix2Pix uses 100).",
			arg("l1", lang.TFloat, "At least 0.", positional, required, atLeast(0), def("0"))),
		field("perceptual", "gan mode: a perceptual (VGG feature) term. Refused: it needs a network pretrained on ImageNet, which pipe does not download; use l1.",
			arg("perceptual", lang.TFloat, "Its weight.", positional, required, atLeast(0))),
		field("d_steps", "gan mode: the update ratio. The discriminator takes every optimizer step (with accumulation, from the gradients of all its micro-batches), the generator every d_steps-th.",
			arg("d_steps", lang.TInt, "At least 1.", positional, required, atLeast(1), def("1"))),
	}
}

// ModelShapes is the input and output shape of one sample of a checked
// model, for checks across models (lang.ModelShaper); ok is false when
// its graph does not build.
func (r *Registry) ModelShapes(m *lang.Model) (in, out []int64, ok bool) {
	g, ds := BuildGraph(m)
	if ds.HasErrors() || g == nil || len(g.Nodes) == 0 {
		return nil, nil, false
	}
	return g.Input, g.OutShape(), true
}
