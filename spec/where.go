package spec

import "pipe/diag"

// Where is where a decoded block was written: the block, its keyword, its
// name and each field given, for the diagnostics raised after decoding.
// The zero Where (a spec built by hand) has no ranges.
type Where struct {
	Range     diag.Range `json:"range"`
	KindRange diag.Range `json:"kind_range"`
	// NameRange is the name label's range; nil when the block has none.
	NameRange *diag.Range `json:"name_range,omitempty"`
	// Fields are the ranges of the fields written, by field name.
	Fields map[string]diag.Range `json:"fields,omitempty"`
}

// Has reports whether the block gives the named field.
func (w *Where) Has(field string) bool {
	if w == nil {
		return false
	}
	_, ok := w.Fields[field]
	return ok
}

// Field is the range of the named field when the block gives it, else
// the block's keyword (where a missing field is reported); nil for a nil
// Where.
func (w *Where) Field(field string) *diag.Range {
	if w == nil {
		return nil
	}
	if r, ok := w.Fields[field]; ok {
		return &r
	}
	r := w.KindRange
	return &r
}

// FieldOrBlock is the range of the named field when given, else of the
// whole block: the subject of an error about the data a field names.
func (w *Where) FieldOrBlock(field string) diag.Range {
	if r, ok := w.Fields[field]; ok {
		return r
	}
	return w.Range
}

// Label is the range of the block's name, else its keyword: where a
// diagnostic about the block as a whole points.
func (w *Where) Label() *diag.Range {
	if w == nil {
		return nil
	}
	if w.NameRange != nil {
		r := *w.NameRange
		return &r
	}
	r := w.KindRange
	return &r
}

// Written is the range of the named field when the block gives it, else
// nil (unlike Field, which falls back to the keyword).
func (w *Where) Written(field string) *diag.Range {
	if w == nil {
		return nil
	}
	if r, ok := w.Fields[field]; ok {
		return &r
	}
	return nil
}
