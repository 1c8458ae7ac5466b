// Package source holds what every reader of package data shares, so that
// a kind of source can live in a package of its own (data/geotiff) without
// importing data, which opens it: the normalisation a dataset reports
// (Norm), errors about a source's fields (Error, FieldErr, FileErr), the
// resolution of the paths a file writes (Resolve), and the seeded random
// streams that make splits, shuffles and augmentations reproducible (RNG,
// SplitIndices). Package data re-exports Norm and Error under its own
// names; its callers need not import this package.
package source
