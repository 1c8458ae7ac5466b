package dataset

import (
	"image"

	"golang.org/x/image/draw"
)

// ImageBytes is img as an images source reads it: resized to h×w with a
// bilinear kernel (copied when it already is h×w), then ch planes of
// bytes, RGB for 3 channels and ITU-R BT.601 luma for 1. pipe serve reads
// uploaded images with it, so they reach the model as training's did.
func ImageBytes(img image.Image, ch, h, w int) []byte {
	sb := img.Bounds()
	plane := h * w
	out := make([]byte, ch*plane)
	rgba := image.NewRGBA(image.Rect(0, 0, w, h))
	if sb.Dx() == w && sb.Dy() == h {
		draw.Draw(rgba, rgba.Bounds(), img, sb.Min, draw.Src)
	} else {
		draw.BiLinear.Scale(rgba, rgba.Bounds(), img, sb, draw.Src, nil)
	}
	for p := 0; p < plane; p++ {
		r, g, b := rgba.Pix[4*p], rgba.Pix[4*p+1], rgba.Pix[4*p+2]
		if ch == 3 {
			out[p], out[plane+p], out[2*plane+p] = r, g, b
		} else {
			// ITU-R BT.601 luma, as image/color's GrayModel.
			out[p] = byte((19595*uint32(r) + 38470*uint32(g) + 7471*uint32(b) + 1<<15) >> 16)
		}
	}
	return out
}
