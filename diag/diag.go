// Package diag holds the diagnostics every stage of pipe reports: a position,
// a range, a severity, a stable code, a summary and a detail. It is a leaf
// package: it imports only the standard library, so the parser, the checker,
// the planner and the executor can all speak it. Rendering lives elsewhere
// (package render), as HCL keeps its text writer apart from its data.
package diag

import (
	"fmt"
	"sort"
	"strings"
)

// Pos is a position in a source file. Line and Column are 1-based; Column
// counts bytes from the start of the line plus one. Byte is the 0-based
// offset of the position from the start of the file.
type Pos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

// String renders the position as "line:column".
func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Column) }

// Before reports whether p comes before q in the file.
func (p Pos) Before(q Pos) bool { return p.Byte < q.Byte }

// Range is a span of source text in one file. Start is inclusive and End is
// exclusive: End is the position just past the last byte of the span, so an
// empty range has Start == End.
type Range struct {
	File  string `json:"file"`
	Start Pos    `json:"start"`
	End   Pos    `json:"end"`
}

// String renders the range as "file:line:column".
func (r Range) String() string {
	if r.File == "" {
		return r.Start.String()
	}
	return r.File + ":" + r.Start.String()
}

// IsZero reports whether the range was never set.
func (r Range) IsZero() bool { return r.Start.Line == 0 }

// Contains reports whether the byte offset lies inside the range.
func (r Range) Contains(byteOffset int) bool {
	return byteOffset >= r.Start.Byte && byteOffset < r.End.Byte
}

// Join returns the smallest range covering r and s. A zero range is ignored.
func Join(r, s Range) Range {
	if r.IsZero() {
		return s
	}
	if s.IsZero() {
		return r
	}
	out := r
	if s.Start.Before(out.Start) {
		out.Start = s.Start
	}
	if out.End.Before(s.End) {
		out.End = s.End
	}
	return out
}

// Severity says whether a diagnostic stops the pipeline.
type Severity int

const (
	// Error stops the stage: the file cannot be planned or run.
	Error Severity = iota
	// Warning is reported but does not stop anything.
	Warning
	// Note adds context, such as where an earlier declaration is.
	Note
)

func (s Severity) String() string {
	switch s {
	case Error:
		return "error"
	case Warning:
		return "warning"
	default:
		return "note"
	}
}

// MarshalText writes the severity as its name in JSON.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Diagnostic is one finding about the source. Summary is a short phrase with
// no trailing period; Detail says what is wrong and how to fix it. Subject
// is where the problem is, when it has a place. Suggestion, when set, is
// replacement text for Subject (a "did you mean").
type Diagnostic struct {
	Severity   Severity `json:"severity"`
	Code       string   `json:"code"`
	Summary    string   `json:"summary"`
	Detail     string   `json:"detail,omitempty"`
	Subject    *Range   `json:"subject,omitempty"`
	Suggestion string   `json:"suggestion,omitempty"`
}

// Error renders the diagnostic on one line.
func (d *Diagnostic) Error() string {
	var b strings.Builder
	if d.Subject != nil {
		b.WriteString(d.Subject.String())
		b.WriteString(": ")
	}
	b.WriteString(d.Severity.String())
	if d.Code != "" {
		b.WriteString(" [" + d.Code + "]")
	}
	b.WriteString(": ")
	b.WriteString(d.Summary)
	if d.Detail != "" {
		b.WriteString(": ")
		b.WriteString(d.Detail)
	}
	return b.String()
}

// Diagnostics is a list of findings. The nil value is an empty list. It
// implements error so a stage can return it where an error is expected;
// check HasErrors rather than comparing with nil, since warnings alone are
// not a failure.
type Diagnostics []*Diagnostic

// Error joins the diagnostics one per line.
func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.Error()
	}
	return strings.Join(lines, "\n")
}

// HasErrors reports whether any diagnostic is an Error.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

// Errs returns only the errors.
func (ds Diagnostics) Errs() Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == Error {
			out = append(out, d)
		}
	}
	return out
}

// Append adds diagnostics and returns the list, like the built-in append.
func (ds Diagnostics) Append(more ...*Diagnostic) Diagnostics { return append(ds, more...) }

// Sort orders diagnostics by file and position, keeping the order of equal
// positions stable.
func (ds Diagnostics) Sort() {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i].Subject, ds[j].Subject
		switch {
		case a == nil && b == nil:
			return false
		case a == nil:
			return false
		case b == nil:
			return true
		case a.File != b.File:
			return a.File < b.File
		default:
			return a.Start.Byte < b.Start.Byte
		}
	})
}

// Errorf builds an Error diagnostic at r.
func Errorf(r Range, code, summary, detailFormat string, args ...any) *Diagnostic {
	return &Diagnostic{Severity: Error, Code: code, Summary: summary, Detail: fmt.Sprintf(detailFormat, args...), Subject: &r}
}

// Warnf builds a Warning diagnostic at r.
func Warnf(r Range, code, summary, detailFormat string, args ...any) *Diagnostic {
	return &Diagnostic{Severity: Warning, Code: code, Summary: summary, Detail: fmt.Sprintf(detailFormat, args...), Subject: &r}
}
