package spec

import "pipe/diag"

// Auto is a setting that may be written auto, such as batch or workers: a
// field of type *Auto[T] is nil when the block leaves the setting out.
// Otherwise IsAuto says it was written auto, with auto's bounds (auto(min
// 8 max 256)) in Min and Max, and Value holds what was written when it
// was not. lang.Decode fills it through SetWritten.
type Auto[T any] struct {
	Value  T        `json:"value,omitzero"`
	IsAuto bool     `json:"auto,omitempty"`
	Min    *float64 `json:"min,omitempty"`
	Max    *float64 `json:"max,omitempty"`
	// Range is the value's (or auto's) range in the file.
	Range diag.Range `json:"range"`
}

// SetWritten records that the setting was written at at, as auto with
// its bounds or as a value, and returns the pointer a value written is
// stored in.
func (a *Auto[T]) SetWritten(at diag.Range, auto bool, min, max *float64) any {
	a.Range, a.IsAuto, a.Min, a.Max = at, auto, min, max
	return &a.Value
}

// Fixed is the value written, and true, when the setting was written and
// not as auto; the zero T and false when it is left to the planner.
func (a *Auto[T]) Fixed() (T, bool) {
	if a == nil || a.IsAuto {
		var zero T
		return zero, false
	}
	return a.Value, true
}

// At is the value's range, nil when the setting was not written.
func (a *Auto[T]) At() *diag.Range {
	if a == nil {
		return nil
	}
	r := a.Range
	return &r
}
