// Package geotiff reads a geotiff source: a GeoTIFF scene cut into tiles
// through GDAL (godal), with a target raster warped onto its grid or
// target bands of the same scene, and the direct block reader that skips
// GDAL for the common layouts (direct.go, tiffifd.go). It also writes
// predictions as GeoTIFFs on a source's grid (WritePrediction).
//
// Package dataset opens it (dataset.Open dispatches a geotiff spec here) and
// re-exports its grid types; this package imports only spec and
// dataset/source, the small package of what every reader shares, so there
// is no cycle. Built without cgo, Open and the rest refuse with a message
// (nogdal.go).
package geotiff
