package native

import (
	"fmt"
	"testing"
)

// volumeGradCases check the 3-D ops ([C, D, H, W]) by finite differences,
// each through the parameters of a layer before it, as gradCases do.
var volumeGradCases = []gcase{
	{name: "conv3d", model: "input [2, 4, 5, 5]\nconv3d 3 k3 pad1 -> conv3d 2 k3 -> flatten -> dense 2", loss: "mse"},
	{name: "conv3d_stride", model: "input [2, 5, 6, 6]\nconv3d 3 k3 s2 pad1 -> conv3d 2 k2 s1 -> gap -> dense 2", loss: "mse"},
	{name: "conv3d_pointwise", model: "input [3, 3, 4, 4]\nconv3d 4 k1 -> conv3d 2 k1 bias false -> flatten -> dense 2", loss: "mse"},
	{name: "convtranspose3d", model: "input [3, 2, 3, 3]\nconv3d 4 k1 -> convtranspose3d 2 k2 s2 -> convtranspose3d 2 k3 s1 pad1 -> flatten -> dense 2", loss: "mse"},
	{name: "convtranspose3d_acc", model: "input [2, 2, 2, 2]\nx = conv3d 3 k1\nconvtranspose3d 2 k2 s2 -> conv3d 3 k3 s2 pad1 -> add x -> flatten -> dense 2", loss: "mse"},
	{name: "batchnorm3d", model: "input [2, 3, 4, 4]\nconv3d 3 k3 pad1 -> batchnorm -> flatten -> dense 2", loss: "mse"},
	{name: "maxpool3d", model: "input [2, 4, 6, 6]\nconv3d 3 k3 pad1 -> maxpool3d 2 -> maxpool3d 3 s1 pad1 -> flatten -> dense 2", loss: "mse"},
	{name: "upsample3d_nearest", model: "input [2, 2, 3, 3]\nconv3d 2 k1 -> upsample3d 2 -> conv3d 2 k3 -> flatten -> dense 2", loss: "mse"},
	{name: "upsample3d_trilinear", model: "input [2, 2, 3, 3]\nconv3d 2 k1 -> upsample3d 3 mode trilinear -> flatten -> dense 2", loss: "mse"},
	{name: "fused_conv3d_bn_relu", model: "input [2, 3, 5, 5]\nconv3d 3 k3 pad1 -> batchnorm -> relu -> conv3d 3 k3 pad1 bias false -> batchnorm -> gelu -> conv3d 2 k1 -> sigmoid -> flatten -> dense 2", loss: "mse", fuse: true},
	{name: "loss_ce_voxels", model: "input [2, 2, 4, 4]\nconv3d 3 k3 pad1", loss: "cross_entropy"},
	{name: "loss_bce_voxels", model: "input [2, 2, 4, 4]\nconv3d 3 k3 pad1 -> relu -> conv3d 1 k1", loss: "bce"},
	{name: "loss_dice_voxels", model: "input [2, 2, 4, 4]\nconv3d 3 k3 pad1 -> relu -> conv3d 2 k1", loss: "dice"},
	{name: "unet3d", model: "input [1, 4, 4, 4]\nunet depth 1 width 2 out 2 dims 3", loss: "cross_entropy", fuse: true, batch: 2},
}

func TestGradientsVolume(t *testing.T) {
	for _, c := range volumeGradCases {
		for _, threads := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/threads%d", c.name, threads), func(t *testing.T) {
				g := graphOf(t, c.model)
				batch := c.batch
				if batch == 0 {
					batch = 3
				}
				cfg := cfgOf(batch, c.loss, "sgd")
				cfg.Threads = threads
				if c.fuse {
					cfg.Fusion = fuseAll(g)
				}
				m := mustBuild(t, g, cfg)
				if c.fuse {
					fused := 0
					for _, u := range m.units {
						if len(u.nodes) > 1 {
							fused++
						}
					}
					if fused == 0 {
						t.Fatal("no fused unit built")
					}
				}
				b := randomBatch(m, batch, 9)
				if c.loss == "mse" {
					for i := range b.Y {
						b.Y[i] *= 3
					}
				}
				gradCheck(t, m, b)
			})
		}
	}
}
