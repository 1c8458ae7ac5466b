// Package render writes diagnostics for people and for tools: as text with
// the source line and a caret under the subject, optionally coloured, or as
// JSON. It reads package diag's data and never changes it (HCL keeps its
// text writer apart from its diagnostics the same way).
package render

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"pipe/diag"
)

// Sources maps file names to their contents, to quote source lines.
type Sources map[string][]byte

// Options control text rendering.
type Options struct {
	// Color adds ANSI colours.
	Color bool
	// Width wraps details at this many columns; 0 means 100.
	Width int
}

const (
	red    = "\x1b[1;31m"
	yellow = "\x1b[1;33m"
	blue   = "\x1b[1;34m"
	bold   = "\x1b[1m"
	reset  = "\x1b[0m"
)

// Text writes each diagnostic with its source line and a caret.
func Text(w io.Writer, ds diag.Diagnostics, src Sources, opt Options) error {
	if opt.Width <= 0 {
		opt.Width = 100
	}
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteByte('\n')
		}
		writeOne(&b, d, src, opt)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func paint(opt Options, code, s string) string {
	if !opt.Color {
		return s
	}
	return code + s + reset
}

func writeOne(b *strings.Builder, d *diag.Diagnostic, src Sources, opt Options) {
	sev := d.Severity.String()
	switch d.Severity {
	case diag.Error:
		sev = paint(opt, red, sev)
	case diag.Warning:
		sev = paint(opt, yellow, sev)
	default:
		sev = paint(opt, blue, sev)
	}
	if d.Subject != nil {
		b.WriteString(paint(opt, bold, d.Subject.String()) + ": ")
	}
	b.WriteString(sev + ": " + paint(opt, bold, d.Summary))
	if d.Code != "" {
		b.WriteString(" [" + d.Code + "]")
	}
	b.WriteByte('\n')
	if d.Subject != nil {
		if text, ok := src[d.Subject.File]; ok {
			quoteLine(b, text, *d.Subject, opt)
		}
	}
	if d.Detail != "" {
		for i, line := range wrap(d.Detail, opt.Width-8) {
			if i == 0 {
				b.WriteString("      = " + line + "\n")
			} else {
				b.WriteString("        " + line + "\n")
			}
		}
	}
}

// quoteLine prints the subject's first line with a caret run under it.
func quoteLine(b *strings.Builder, text []byte, r diag.Range, opt Options) {
	start := r.Start.Byte
	if start > len(text) {
		return
	}
	ls := start
	for ls > 0 && text[ls-1] != '\n' {
		ls--
	}
	le := start
	for le < len(text) && text[le] != '\n' {
		le++
	}
	line := strings.TrimRight(string(text[ls:le]), "\r")
	if !utf8.ValidString(line) || strings.ContainsRune(line, 0) {
		return
	}
	end := r.End.Byte
	if end > ls+len(line) || end <= start {
		end = start + 1
		if start >= ls+len(line) {
			end = start
		}
	}
	num := fmt.Sprint(r.Start.Line)
	gutter := strings.Repeat(" ", len(num))
	display := strings.ReplaceAll(strings.ReplaceAll(line, "\t", "    "), "\uFEFF", "")
	b.WriteString(paint(opt, blue, " "+num+" | ") + display + "\n")
	pad := visualWidth(line[:start-ls])
	n := visualWidth(line[start-ls : min(end, ls+len(line))-ls])
	if n < 1 {
		n = 1
	}
	b.WriteString(paint(opt, blue, " "+gutter+" | ") + strings.Repeat(" ", pad) + paint(opt, red, strings.Repeat("^", n)) + "\n")
}

// visualWidth is the columns s takes as quoteLine shows it: a tab is
// four, a byte order mark (dropped from the display) none.
func visualWidth(s string) int {
	n := 0
	for _, r := range s {
		switch r {
		case '\t':
			n += 4
		case '\uFEFF':
		default:
			n++
		}
	}
	return n
}

func wrap(s string, width int) []string {
	if width < 20 {
		width = 20
	}
	var lines []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			if line != "" && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > width {
				lines = append(lines, line)
				line = word
				continue
			}
			if line == "" {
				line = word
			} else {
				line += " " + word
			}
		}
		lines = append(lines, line)
	}
	return lines
}

// JSON writes the diagnostics as a JSON array (an empty array when there
// are none), one object per diagnostic with file, line, column and byte of
// both ends of its subject.
func JSON(w io.Writer, ds diag.Diagnostics) error {
	if ds == nil {
		ds = diag.Diagnostics{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(ds)
}
