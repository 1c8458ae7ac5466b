package torch

import (
	"fmt"

	"pipe/planner/cost"
	"pipe/stdlib"
)

// oneDNN's AMX path. On a CPU with AMX-BF16 (Intel's Sapphire Rapids and
// later) oneDNN v2.6 (PyTorch 1.13's) runs a bf16 conv on its AMX
// kernels, in NHWC: brgemm_convolution_fwd_t forward,
// jit_avx512_core_amx_convolution_bwd_data_t for the input's gradient and
// jit_avx512_core_amx_convolution_bwd_weights_t for the weights'
// (src/cpu/cpu_convolution_list.cpp). PyTorch's copies in the library's
// layout are as many elements as on AVX-512 (onednnWork). What differs is
// the weight-gradient kernel's scratchpad, which ideep allocates for each
// call (scratchpad_mode::user) and frees after: a transposed copy of the
// input (tr_src) and of the output's gradient (tr_diff_dst) for each
// thread the kernel splits the batch over, each rounded out to whole
// tiles and doubled by its channel blocking, where the AVX-512 kernel
// keeps them for one thread, unpadded and not doubled (cells' largest
// conv: 70.2 MiB against 16.2). The forward's and the input gradient's
// scratchpads are a few rows a thread, not priced. Derivation from
// jit_avx512_core_amx_conv_kernel.cpp (init_conf, balance,
// init_scratchpad): docs/design/torch-cpu-amx.md.

// convAMX says whether oneDNN runs a conv computed in low bytes per
// element on its AMX kernels on the CPU setup s.
func convAMX(s *CPUSetup, low int64) bool {
	return s != nil && s.AMX && low == 2 && convOneDNN(s, low)
}

// convScratch is, by node ID, the scratchpad each conv's kernels hold on
// the CPU beyond onednnWork, which does not grow with the batch: oneDNN's
// AMX weight gradient where s runs it (amxWeightScratch), nil elsewhere.
func convScratch(g *stdlib.Graph, low int64, s *CPUSetup) []cost.Workspace {
	if !convAMX(s, low) {
		return nil
	}
	threads := max(s.Threads, 1)
	ws := make([]cost.Workspace, len(g.Nodes))
	for _, nd := range g.Nodes {
		if nd.Op != "conv" || len(nd.In) == 0 {
			continue
		}
		if b, mb := amxWeightScratch(nd, threads); b > 0 {
			ws[nd.ID] = cost.Workspace{Fixed: b, Basis: fmt.Sprintf(
				"oneDNN's AMX weight gradient: transposed input and output gradient of %d sample(s), one per thread it splits the batch over", mb)}
		}
	}
	return ws
}

// amxGeom is a conv as oneDNN's AMX weight-gradient kernel sees it
// (jit_conv_conf_t): per group channels, spatial sizes (1 where absent),
// kernel, stride, oneDNN's dilation (PyTorch's less one) and padding.
type amxGeom struct {
	groups, ic, oc             int64
	id, ih, iw, od, oh, ow     int64
	kd, kh, kw                 int64
	stride, dil                int64
	strideD, strideH           int64 // 1 where the conv has fewer dimensions
	fPad, tPad, lPad           int64
	backPad, bPad, rPad        int64
	nbIC, nbOC, icBlk, ocBlk   int64 // blocks of 16 channels and the kernel's blocking of them
	trIW, trOW, trPad          int64
	work                       int64 // what the batch splits into: nthr_mb_work over mb
	workPerSample, fullSpatial bool
}

// amxGeometry reads nd's shapes and arguments; ok is false where the AMX
// weight-gradient kernel does not take the conv (depthwise, dilated and
// strided at once, padding past its bounds), and another kernel runs it.
func amxGeometry(nd *stdlib.Node) (amxGeom, bool) {
	a := nd.Args
	d := len(nd.Out) - 1
	if nd.Op != "conv" || len(nd.In) == 0 || d < 1 || d > 3 || len(nd.In[0]) != d+1 {
		return amxGeom{}, false
	}
	c := amxGeom{groups: max(a.Groups, 1), stride: max(a.Stride, 1), dil: max(a.Dilation, 1) - 1}
	c.ic, c.oc = nd.In[0][0]/c.groups, nd.Out[0]/c.groups
	if c.groups > 1 && c.ic == 1 && c.oc == 1 {
		return amxGeom{}, false // depthwise: jit_uni_dw_convolution_bwd_weights_t
	}
	if c.dil > 0 && c.stride > 1 {
		return amxGeom{}, false
	}
	sp := func(shape []int64, i int) int64 { // spatial size i of 3 (d, h, w)
		if j := i - (3 - d); j >= 0 {
			return shape[1+j]
		}
		return 1
	}
	c.id, c.ih, c.iw = sp(nd.In[0], 0), sp(nd.In[0], 1), sp(nd.In[0], 2)
	c.od, c.oh, c.ow = sp(nd.Out, 0), sp(nd.Out, 1), sp(nd.Out, 2)
	k, p := max(a.Kernel, 1), a.Padding
	c.kw, c.lPad = k, p
	c.kh, c.kd = 1, 1
	c.strideD, c.strideH = 1, 1
	if d >= 2 {
		c.kh, c.tPad, c.strideH = k, p, c.stride
	}
	if d == 3 {
		c.kd, c.fPad, c.strideD = k, p, c.stride
	}
	ext := func(k int64) int64 { return (k-1)*(c.dil+1) + 1 }
	end := func(pad, out, in, k int64) int64 { return max(0, (out-1)*c.stride+ext(k)-in-pad) }
	c.rPad, c.bPad, c.backPad = end(c.lPad, c.ow, c.iw, c.kw), end(c.tPad, c.oh, c.ih, c.kh), end(c.fPad, c.od, c.id, c.kd)
	if c.dil > 0 && d >= 2 && ext(c.kh) > c.ih {
		return amxGeom{}, false
	}
	if c.lPad >= ext(c.kw) || c.rPad >= ext(c.kw) || c.tPad > ext(c.kh)/2 || c.bPad > ext(c.kh)/2 ||
		c.fPad >= ext(c.kd) || c.backPad >= ext(c.kd) {
		return amxGeom{}, false
	}
	c.nbIC, c.nbOC = divUp(c.ic, 16), divUp(c.oc, 16)
	c.icBlk, c.ocBlk = min(c.nbIC, 2), min(c.nbOC, 2)
	c.trPad = rndUp(max(c.lPad, c.rPad+1), 32)
	c.trIW = rndUp(divUp(c.iw, c.stride)+c.trPad, 32) * c.stride
	c.trOW = rndUp(c.ow, 2)
	c.fullSpatial = d < 3 && c.ih == c.oh && c.iw == c.ow && c.stride == 1 && c.dil == 0 &&
		c.lPad == c.kw/2 && c.tPad == c.kh/2 && (c.lPad == 1 || c.rPad == 1) && c.kh == c.kw &&
		c.ih >= c.kh && c.iw >= c.kw
	switch {
	case d == 3:
		c.work = c.od // harness_3d_reduction: mb·od
	case c.fullSpatial || d == 1:
		c.work, c.workPerSample = 1, true // mb
	default:
		c.work = c.oh // harness_2d_reduction: mb·oh
	}
	return c, true
}

// amxWeightScratch is the scratchpad oneDNN v2.6's AMX weight-gradient
// kernel books for nd's bf16 conv on threads threads, in bytes, and how
// many samples it transposes at once (nthr_mb); 0 where the kernel does
// not take the conv. The kernel's threads split the batch (nthr_mb), the
// input's and the output's channel blocks; balance picks the split at
// least traffic, which barely depends on the batch, and is priced at a
// batch of threads samples: for a smaller batch nthr_mb can be lower.
func amxWeightScratch(nd *stdlib.Node, threads int) (int64, int64) {
	c, ok := amxGeometry(nd)
	if !ok {
		return 0, 0
	}
	mb := int64(max(threads, 1))
	nthrMB := c.balance(mb, mb)
	trSrc := nthrMB*c.groups*c.nbIC*16*c.trIW*c.ih*c.id*c.icBlk + c.trPad
	trDiffDst := nthrMB * c.groups * c.nbOC * 16 * c.trOW * c.oh * c.od * c.ocBlk
	// bf16 weights' (and bias') gradient: one fp32 buffer a sample-thread.
	red := nthrMB * c.groups * c.nbOC * 16 * (c.nbIC*16*c.kd*c.kh*c.kw + 1)
	return 2*(trSrc+trDiffDst) + 4*red, nthrMB
}

// balance is jit_avx512_core_amx_bwd_weights_kernel_t::balance: the
// number of threads the batch of mb samples is split over (nthr_mb), the
// rest going to channel blocks, for the least estimated traffic, in its
// float arithmetic.
func (c amxGeom) balance(mb, maxThreads int64) int64 {
	if maxThreads < c.groups {
		return 1
	}
	nthr := maxThreads / c.groups
	work := c.work * mb
	icb, ocb := c.nbIC/c.icBlk, c.nbOC/c.ocBlk
	src := float32(mb * c.ic * c.id * c.ih * c.trIW * 2)
	dst := float32(mb * c.oc * c.od * c.oh * c.trOW * 2)
	wei := float32(c.oc * c.ic * c.kd * c.kh * c.kw * 4)
	comp := 0.5 * (dst + src) / wei
	ratio := float32(ocb) / float32(icb)
	srcCoef := max(1/ratio, 1)
	if comp < 1 {
		srcCoef *= 4
	}
	dstCoef, weiCoef := max(ratio, 1), max(comp, 1)
	const g = 1 // div_up(ngroups, nthr_g): nthr_g is ngroups
	cost := func(nmb, noc, nic int64) float32 {
		s := srcCoef * float32(divUp(work, nmb)) * g * float32(divUp(icb, nic)) * float32(mb) *
			float32(16*c.icBlk) * float32(c.id) * float32(c.ih) * float32(c.trIW) /
			float32(work) / float32(c.strideD) / float32(c.strideH) / float32(c.stride)
		w := weiCoef * g * float32(divUp(ocb, 16*c.ocBlk*noc)) * float32(divUp(icb, nic)) *
			float32(c.kh*c.kw*c.kd) * float32(16*c.icBlk) * float32(16*c.ocBlk)
		d := dstCoef * float32(divUp(work, nmb)) * g * float32(divUp(ocb, 16*c.ocBlk*noc)) * float32(mb) *
			float32(16*c.ocBlk) * float32(c.od) * float32(c.oh) * float32(c.trOW) / float32(work)
		return s + d + w
	}
	bestMB, best := int64(1), cost(1, 1, 1)
	for nmb := int64(1); nmb <= min(nthr, work); nmb++ {
		par := nthr / nmb
		for noc := int64(1); noc <= min(par, ocb); noc++ {
			nic := min(par/noc, icb)
			if v := cost(nmb, noc, nic); v <= best {
				best, bestMB = v, nmb
			}
		}
	}
	if bestMB > nthr/2 && bestMB < nthr {
		bestMB = min(work, nthr)
	}
	return bestMB
}

func divUp(a, b int64) int64 { return (a + b - 1) / b }

func rndUp(a, b int64) int64 { return divUp(a, b) * b }
