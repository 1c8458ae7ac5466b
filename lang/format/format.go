package format

// How the formatter lays out a file
//
// The source is lexed into tokens and cut into lines at newline tokens.
// The formatter keeps the tokens, their order and the line breaks, and
// recomputes only whitespace: each line's indentation (two spaces per open
// brace or bracket, one more level for a line continuing a '->' chain),
// the gap between two tokens, the alignment of keys and of trailing
// comments in runs of lines, and blank lines. It never joins or breaks a
// line. Each rule depends only on the tokens, the line breaks and the
// class of the source gap (none, one space, wider), and maps each class to
// a gap of the same class, which makes the formatter idempotent.
//
// The rules in full: docs/design/formatter.md.

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"pipe/lang/syntax"
)

// Option adjusts the formatter.
type Option func(*options)

type options struct {
	isLayer func(name string) bool
}

// WithLayers tells the formatter which names are layers, so that a layer
// line in a model ("resnet18 classes 20") is not aligned with the model's
// fields as if it were "key value". The lang package cannot import the
// registry; callers pass stdlib's lookup, as they pass a lang.Schema to
// the checker.
func WithLayers(isLayer func(name string) bool) Option {
	return func(o *options) { o.isLayer = isLayer }
}

// Source formats a .pipe file canonically. It returns an error, wrapping the
// parser's diag.Diagnostics, when the source does not parse cleanly; the
// source is then not formatted.
func Source(src []byte, opts ...Option) ([]byte, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if _, ds := syntax.Parse("", src); ds.HasErrors() {
		return nil, fmt.Errorf("format: the source has errors: %w", ds)
	}
	text := strings.TrimPrefix(string(src), "\uFEFF")
	lines := splitLines(syntax.Tokens(text))
	indentLines(lines)
	lines = dropBlankLines(lines)
	alignKeys(lines, o)
	return render(lines), nil
}

// gap classifies the whitespace between two tokens of a line in the source.
type gap uint8

const (
	gapNone gap = iota // the tokens touch
	gapOne             // one space (or one other whitespace character)
	gapWide            // two or more, or a tab
)

func classify(ws string) gap {
	n := 0
	for _, r := range ws {
		if r == '\t' {
			n += 2
		} else {
			n++
		}
	}
	switch {
	case n == 0:
		return gapNone
	case n == 1:
		return gapOne
	}
	return gapWide
}

// tok is one non-whitespace token of a line.
type tok struct {
	kind syntax.Kind
	text string // as printed: comments lose trailing whitespace and CRs
	gap  gap    // the whitespace before it in the source, on the same line
}

func (t tok) is(texts ...string) bool {
	if t.kind != syntax.KindPunct {
		return false
	}
	for _, s := range texts {
		if t.text == s {
			return true
		}
	}
	return false
}

func (t tok) code() bool { return t.kind != syntax.KindComment }

func (t tok) opener() bool { return t.is("{", "[", "(") }

func (t tok) closer() bool { return t.is("}", "]", ")") }

func (t tok) lineComment() bool {
	return t.kind == syntax.KindComment && strings.HasPrefix(t.text, "//")
}

// line is one source line: its tokens and the layout decided for it.
type line struct {
	toks   []tok
	indent int  // spaces before the first token
	cont   bool // continues a statement begun on an earlier line
	keyPad int  // when > 0, the gap after the first token (key alignment)
	multi  bool // holds a block comment that spans lines
}

func (l *line) blank() bool { return len(l.toks) == 0 }

// firstCode and lastCode return the first and last code token of the line,
// or false when the line holds only comments.
func (l *line) firstCode() (tok, bool) {
	for _, t := range l.toks {
		if t.code() {
			return t, true
		}
	}
	return tok{}, false
}

func (l *line) lastCode() (tok, bool) {
	for i := len(l.toks) - 1; i >= 0; i-- {
		if l.toks[i].code() {
			return l.toks[i], true
		}
	}
	return tok{}, false
}

// splitLines cuts the token stream into lines.
func splitLines(toks []syntax.Token) []*line {
	var out []*line
	cur := &line{}
	var ws strings.Builder
	for _, t := range toks {
		switch t.Kind {
		case syntax.KindEOF:
		case syntax.KindSpace:
			ws.WriteString(t.Text)
		case syntax.KindNewline:
			out = append(out, cur)
			cur = &line{}
			ws.Reset()
		default:
			text := t.Text
			if t.Kind == syntax.KindComment {
				text = cleanComment(text)
				if strings.Contains(text, "\n") {
					cur.multi = true
				}
			}
			cur.toks = append(cur.toks, tok{kind: t.Kind, text: text, gap: classify(ws.String())})
			ws.Reset()
		}
	}
	return append(out, cur)
}

// cleanComment turns CRLF into LF and drops the whitespace at the end of
// each line of a comment.
func cleanComment(text string) string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\f\r\uFEFF")
	}
	return strings.Join(lines, "\n")
}

// frame is one open brace or bracket, or the file itself at the bottom of
// the stack.
type frame struct {
	open    string // "{", "[", "(", or "" for the file
	indent  int    // indentation of the line holding the opener
	inner   int    // indentation of the lines inside
	chained bool   // the last code line in this body ended with '->'
}

func (f *frame) bracket() bool { return f.open == "[" || f.open == "(" }

// indentLines sets the indentation of every line and marks the lines that
// continue a statement.
func indentLines(lines []*line) {
	stack := []*frame{{}}
	for _, l := range lines {
		top := stack[len(stack)-1]
		l.cont = top.bracket() || top.chained
		first, hasCode := l.firstCode()
		switch {
		case hasCode && first.closer() && len(stack) > 1:
			l.indent = top.indent
		case top.chained:
			l.indent = top.inner + 2
		default:
			l.indent = top.inner
		}
		for _, t := range l.toks {
			switch {
			case t.opener():
				stack = append(stack, &frame{open: t.text, indent: l.indent, inner: l.indent + 2})
			case t.closer() && len(stack) > 1:
				stack = stack[:len(stack)-1]
			}
		}
		if last, ok := l.lastCode(); ok {
			if top := stack[len(stack)-1]; !top.bracket() {
				top.chained = last.kind == syntax.KindArrow
			}
		}
	}
}

// dropBlankLines collapses runs of blank lines and drops those at the start
// and end of the file and of every brace or bracket.
func dropBlankLines(lines []*line) []*line {
	var out []*line
	for _, l := range lines {
		if l.blank() {
			if len(out) == 0 || out[len(out)-1].blank() {
				continue
			}
			if last, ok := out[len(out)-1].lastCode(); ok && last.opener() {
				continue
			}
		} else if first, ok := l.firstCode(); ok && first.closer() && len(out) > 0 && out[len(out)-1].blank() {
			out = out[:len(out)-1]
		}
		out = append(out, l)
	}
	for len(out) > 0 && out[len(out)-1].blank() {
		out = out[:len(out)-1]
	}
	return out
}

// alignKeys sets keyPad on the statements of every run of key-value
// statements.
func alignKeys(lines []*line, o options) {
	var run []*line
	flush := func() {
		width := 0
		for _, l := range run {
			width = max(width, utf8.RuneCountInString(l.toks[0].text))
		}
		for _, l := range run {
			if len(run) == 1 {
				l.keyPad = 1
			} else {
				l.keyPad = width - utf8.RuneCountInString(l.toks[0].text) + 1
			}
		}
		run = run[:0]
	}
	for i := 0; i < len(lines); {
		j := i + 1
		for j < len(lines) && lines[j].cont {
			j++
		}
		if lines[i].cont {
			// Only a file that starts inside a statement gets here; such a
			// file does not parse.
			i = j
			continue
		}
		l := lines[i]
		switch {
		case !isKeyValue(lines[i:j]) || (o.isLayer != nil && o.isLayer(l.toks[0].text)):
			flush()
		case len(run) > 0 && run[0].indent != l.indent:
			flush()
			run = append(run, l)
		default:
			run = append(run, l)
		}
		i = j
	}
	flush()
}

// isKeyValue reports whether a statement (its first line and continuation
// lines) has the "key value..." shape that key alignment lines up.
func isKeyValue(stmt []*line) bool {
	l := stmt[0]
	if len(l.toks) < 2 || l.toks[0].kind != syntax.KindIdent {
		return false
	}
	if next := l.toks[1]; next.is("(") && next.gap == gapNone {
		return false
	}
	var second *tok
	for k := 1; k < len(l.toks); k++ {
		if l.toks[k].code() {
			second = &l.toks[k]
			break
		}
	}
	if second == nil || second.is("=", ";", ",", ")", "]") {
		return false
	}
	for _, s := range stmt {
		for _, t := range s.toks {
			if t.kind == syntax.KindArrow || t.is("{", "}") {
				return false
			}
		}
	}
	return true
}

// spaces returns the gap printed between tokens p and n of one line; n.gap
// is the gap the source had there.
func spaces(p, n tok) int {
	switch {
	case p.is("[", "("), n.is("]", ")", ",", ";"):
		return 0
	case p.is("{"):
		if n.is("}") {
			return 0
		}
		return 1
	case n.is("{", "}"), p.is(",", ";"), p.kind == syntax.KindArrow, n.kind == syntax.KindArrow:
		return 1
	case n.is("(") && p.kind == syntax.KindIdent && n.gap == gapNone:
		return 0
	case n.gap == gapWide:
		return 2
	}
	return 1
}

// render prints the lines, aligning the trailing comments of runs of lines.
func render(lines []*line) []byte {
	type printed struct {
		code    string // indentation and code, with any comment before the trailing one
		comment string // the trailing // comment after code, or ""
		align   bool   // whether the comment may align with its neighbours
		indent  int
	}
	out := make([]printed, len(lines))
	for i, l := range lines {
		toks := l.toks
		p := &out[i]
		p.indent = l.indent
		if n := len(toks); n > 1 && toks[n-1].lineComment() {
			if _, hasCode := l.lastCode(); hasCode {
				p.comment = toks[n-1].text
				p.align = !l.multi
				toks = toks[:n-1]
			}
		}
		var b strings.Builder
		if len(toks) > 0 {
			b.WriteString(strings.Repeat(" ", l.indent))
		}
		for k, t := range toks {
			if k > 0 {
				n := spaces(toks[k-1], t)
				if k == 1 && l.keyPad > 0 {
					n = l.keyPad
				}
				b.WriteString(strings.Repeat(" ", n))
			}
			b.WriteString(t.text)
		}
		p.code = b.String()
	}

	var b strings.Builder
	for i := 0; i < len(out); {
		if out[i].comment == "" || !out[i].align {
			b.WriteString(out[i].code)
			if out[i].comment != "" {
				b.WriteString("  " + out[i].comment)
			}
			b.WriteByte('\n')
			i++
			continue
		}
		j, width := i, 0
		for j < len(out) && out[j].comment != "" && out[j].align && out[j].indent == out[i].indent {
			width = max(width, utf8.RuneCountInString(out[j].code))
			j++
		}
		for _, p := range out[i:j] {
			b.WriteString(p.code)
			b.WriteString(strings.Repeat(" ", width-utf8.RuneCountInString(p.code)+2))
			b.WriteString(p.comment)
			b.WriteByte('\n')
		}
		i = j
	}
	return []byte(b.String())
}
