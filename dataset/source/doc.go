// Package source holds what every reader of package dataset shares, so
// that a kind of source can live in a package of its own (dataset/geotiff)
// without importing dataset, which opens it: the normalisation a source
// reports (Norm), errors about a source's fields (Error, FieldErr,
// FileErr), the resolution of the paths a file writes (Resolve), and the
// seeded random streams that make splits, shuffles and augmentations
// reproducible (RNG, SplitIndices). Package dataset re-exports Norm and
// Error (as SourceError); its callers need not import this package.
package source
