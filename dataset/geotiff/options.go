package geotiff

import "pipe/dataset/source"

// Options are what Open needs beside the spec, as data's options give
// them.
type Options struct {
	// Base is the folder the spec's paths resolve against ("" for the
	// working directory).
	Base string
	// Seed is the seed of a split that gives none: the file's.
	Seed int64
	// Norm, when set and of the scene's bands, is used instead of the
	// scene's own statistics (an evaluation source scaled as training's).
	Norm *source.Norm
}

// path resolves a path written in the spec.
func (c *Options) path(p string) string { return source.Resolve(c.Base, p) }
