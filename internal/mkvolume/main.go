// Command mkvolume builds the volume that examples/volume_unet.pipe
// trains on, from the Landsat 7 scene that `make data` fetches: the
// scene's 6 bands stacked as the depth of a one-channel volume
// [1, 6, 352, 349], written as two Zarr v2 arrays beside each other:
//
//	clean  the scene's values (uint8), gzip chunks: the targets
//	noisy  the same plus Gaussian noise of deviation 25 (float32, from a
//	       fixed seed), zstd chunks: the inputs
//
// so that the example is a 3-D denoising U-Net, as used on microscopy
// stacks (CARE, CytoDL's denoising): a voxel's neighbours in the band
// direction as well as in the plane tell the model what it was.
//
// Usage: go run ./internal/mkvolume SCENE.tif OUT.zarr
package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"pipe/dataset"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: mkvolume SCENE.tif OUT.zarr")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "mkvolume:", err)
		os.Exit(1)
	}
}

func run(scene, out string) error {
	x, shape, err := dataset.ReadVolume(scene)
	if err != nil {
		return err
	}
	// A one-page scene reads as [bands, 1, H, W]: its bands become depth.
	if len(shape) != 4 || shape[1] != 1 {
		return fmt.Errorf("%s has shape %v; want one page of bands", scene, shape)
	}
	vol := []int{1, shape[0], shape[2], shape[3]}
	chunks := []int{1, shape[0], 64, 64}
	tmp := out + ".tmp"
	os.RemoveAll(tmp)
	if err := dataset.WriteZarr(filepath.Join(tmp, "clean"), vol, chunks, "|u1", "gzip", x); err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(10, 3))
	noisy := make([]float32, len(x))
	for i, v := range x {
		noisy[i] = v + float32(25*r.NormFloat64())
	}
	if err := dataset.WriteZarr(filepath.Join(tmp, "noisy"), vol, chunks, "<f4", "zstd", noisy); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, ".zgroup"), []byte(`{"zarr_format": 2}`), 0o644); err != nil {
		return err
	}
	os.RemoveAll(out)
	return os.Rename(tmp, out)
}
