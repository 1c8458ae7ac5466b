package stdlib

// The ops an image-to-image GAN needs (Pix2Pix, ESRGAN): leakyrelu,
// instancenorm and pixelshuffle, with the same rules as prims.go.

// leakyrelu keeps its input, as autograd's leaky_relu_backward reads it:
// a comparison and a multiply per element.
func (b *builder) leakyrelu(name string, x int, slope float64) int {
	in, ok := b.shape(x)
	if !ok {
		return -1
	}
	var cc calc
	n := b.newNode(name, "leakyrelu", cloneShape(in), OpArgs{Slope: slope}, x)
	n.FLOPs = cc.mul(2, cc.numel(in))
	n.Keep = []int{x}
	return b.push(n, &cc)
}

// instancenorm normalises each channel of each sample over H and W: 5
// FLOPs per element as batchnorm. PyTorch runs it as a batch norm of
// [1, N·C, H, W], which keeps its input and a mean and an inverse
// deviation per (sample, channel).
func (b *builder) instancenorm(name string, x int, a OpArgs) int {
	in, ok := b.shape(x)
	if !ok || !b.spatial("instancenorm", in) {
		return -1
	}
	var cc calc
	n := b.newNode(name, "instancenorm", cloneShape(in), a, x)
	if a.Affine {
		n.Params = cc.mul(2, in[0])
	}
	n.FLOPs = cc.mul(5, cc.numel(in))
	n.Keep = []int{x}
	n.Private = cc.mul(2, in[0])
	return b.push(n, &cc)
}

// pixelshuffle moves r² channels into an r×r block of pixels: a copy,
// which keeps nothing for backward.
func (b *builder) pixelshuffle(name string, x int, r int64) int {
	in, ok := b.shape(x)
	if !ok || !b.spatial("pixelshuffle", in) {
		return -1
	}
	var cc calc
	r2 := cc.mul(r, r)
	if cc.overflow || in[0]%r2 != 0 {
		return b.shapeErr("pixelshuffle channels do not divide by r²",
			"pixelshuffle %d turns each %d channels into one channel of a %dx larger image, so the input's channels must divide by %d; it gets %s. Give the conv before it a multiple of %d channels (conv %d k3 pad1 -> pixelshuffle %d).",
			r, r2, r, r2, shapeStr(in), r2, max(in[0]/r2, 1)*r2, r)
	}
	out := []int64{in[0] / r2, cc.mul(in[1], r), cc.mul(in[2], r)}
	n := b.newNode(name, "pixelshuffle", out, OpArgs{Scale: r}, x)
	return b.push(n, &cc)
}
