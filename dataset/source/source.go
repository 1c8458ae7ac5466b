package source

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"pipe/dataset/remote"
	"pipe/diag"
	"pipe/spec"
)

// Norm is an affine input normalisation, x' = (x − Mean[c]) / Std[c], per
// channel (images, rasters) or per input column (tables). Every normalize
// mode is one: scale is Mean = min, Std = max − min; standard is the mean
// and standard deviation.
type Norm struct {
	Mean, Std []float64
}

// Error is an error about a source: Subject is the range of the field it
// concerns (the path of a missing file, the tile that does not fit), or
// the source's block when no field does. The executor turns it into a
// diagnostic.
type Error struct {
	Subject diag.Range
	Err     error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// FieldErr wraps err with the range of the named field of s, or of its
// block; an error that already has a subject is returned as it is.
func FieldErr(s *spec.Source, field string, err error) error {
	if err == nil {
		return nil
	}
	var se *Error
	if errors.As(err, &se) {
		return err
	}
	return &Error{Subject: s.At.FieldOrBlock(field), Err: err}
}

// Resolve resolves a path written in a source against base (the .pipe
// file's folder; "" for the working directory). A URL (s3://, gs://,
// https://) is its own.
func Resolve(base, p string) string {
	if p == "" || filepath.IsAbs(p) || base == "" || remote.IsURL(p) {
		return p
	}
	return filepath.Join(base, p)
}

// FileErr describes err from opening p, as the source writes it, resolved
// against base: a missing file says where it was looked for.
func FileErr(base, p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		abs, _ := filepath.Abs(Resolve(base, p))
		return fmt.Errorf("%s: file not found (looked for %s)", p, abs)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: permission denied", p)
	}
	return fmt.Errorf("%s: %w", p, err)
}
