package syntax

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"pipe/diag"
	"pipe/lang/ast"
)

// Limits that keep hostile input from costing more than it should.
const (
	// MaxFileSize is the largest source Parse accepts. The largest model
	// files written by hand are a few kilobytes; a larger file is almost
	// certainly not a pipe file.
	MaxFileSize = 1 << 20
	// MaxDepth bounds the nesting of braces, brackets and parentheses.
	MaxDepth = 64
)

// Parse parses one .pipe file. It always returns a File, holding every
// statement it could parse; a top-level statement with a syntax error is
// left out and reported, and parsing resumes at the next one.
func Parse(filename string, src []byte) (*ast.File, diag.Diagnostics) {
	p := &parseState{file: filename, src: string(src), lines: lineStarts(src)}
	f := &ast.File{Name: filename, Range: p.rng(0, len(src))}
	if !p.precheck() {
		f.Partial = true
		return f, p.diags
	}
	toks := lexAll(p.src)
	f.Comments = p.scanTokens(toks)
	for _, ch := range p.chunks(toks) {
		f.Stmts = append(f.Stmts, p.parseChunk(ch)...)
	}
	p.diags.Sort()
	f.Partial = p.diags.HasErrors()
	return f, p.diags
}

type parseState struct {
	file  string
	src   string
	lines []int
	diags diag.Diagnostics
}

func lineStarts(src []byte) []int {
	starts := []int{0}
	for i, b := range src {
		if b == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// pos converts a byte offset into a position. Columns count bytes.
func (p *parseState) pos(off int) diag.Pos {
	line := sort.Search(len(p.lines), func(i int) bool { return p.lines[i] > off }) - 1
	if line < 0 {
		line = 0
	}
	return diag.Pos{Line: line + 1, Column: off - p.lines[line] + 1, Byte: off}
}

func (p *parseState) rng(start, end int) diag.Range {
	return diag.Range{File: p.file, Start: p.pos(start), End: p.pos(end)}
}

func (p *parseState) errorf(start, end int, code, summary, detail string, args ...any) {
	p.diags = append(p.diags, diag.Errorf(p.rng(start, end), code, summary, detail, args...))
}

// precheck rejects input that is not text before the lexer sees it.
func (p *parseState) precheck() bool {
	if len(p.src) > MaxFileSize {
		p.errorf(0, 0, "file-too-large", "file too large",
			"The file is %d bytes; pipe files are limited to %d bytes. Is this the right file?", len(p.src), MaxFileSize)
		return false
	}
	if i := strings.IndexByte(p.src, 0); i >= 0 {
		p.errorf(i, i+1, "binary-file", "binary file",
			"The file holds a NUL byte at offset %d, so it is not a text file. Is this the right file?", i)
		return false
	}
	if !utf8.ValidString(p.src) {
		i := 0
		for i < len(p.src) {
			r, n := utf8.DecodeRuneInString(p.src[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		p.errorf(i, i+1, "invalid-utf8", "invalid UTF-8",
			"The byte 0x%02x at offset %d is not valid UTF-8. Save the file as UTF-8.", p.src[i], i)
		return false
	}
	return true
}

// scanTokens reports lexical errors and collects the comments.
func (p *parseState) scanTokens(toks []lexer.Token) []*ast.Comment {
	var comments []*ast.Comment
	for i, t := range toks {
		start, end := t.Pos.Offset, t.Pos.Offset+len(t.Value)
		switch t.Type {
		case tokComment:
			comments = append(comments, &ast.Comment{Text: t.Value, Range: p.rng(start, end)})
		case tokOpenComment:
			comments = append(comments, &ast.Comment{Text: t.Value, Range: p.rng(start, end)})
			p.errorf(start, start+2, "unterminated-comment", "unterminated comment",
				"This /* comment is never closed. Close it with */.")
		case tokOpenString:
			p.errorf(start, end, "unterminated-string", "unterminated string",
				"The string is not closed before the end of the line. Add the closing \".")
		case tokInvalid:
			p.errorf(start, end, "invalid-character", "unexpected character",
				"The character %q cannot appear here: it is not part of any token of the language.", t.Value)
		case tokBadIdent:
			bad := ""
			for _, r := range t.Value {
				if r > 0x7f && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
					bad = string(r)
					break
				}
			}
			p.errorf(start, end, "invalid-name", fmt.Sprintf("%q is not a name", t.Value),
				"%q cannot be part of a name: names are letters (of any script), digits and _.", bad)
			toks[i].Type = tokIdent // read on as a name: one mistake, one diagnostic
		}
	}
	return comments
}

// A chunk is the tokens of one top-level statement: the file is cut at every
// newline outside brackets, so a syntax error stays inside its statement.
type tokenChunk []lexer.Token

var openers = map[string]string{"{": "}", "[": "]", "(": ")"}

// chunks cuts the token stream at top-level newlines, drops the tokens that
// were already reported, and reports unbalanced brackets.
func (p *parseState) chunks(toks []lexer.Token) []tokenChunk {
	var out []tokenChunk
	var cur tokenChunk
	var stack []lexer.Token
	tooDeep := false
	flush := func() {
		if len(cur) > 0 && !tooDeep {
			out = append(out, cur)
		}
		cur, stack, tooDeep = nil, nil, false
	}
	for _, t := range toks {
		switch t.Type {
		case tokInvalid, tokOpenString, tokOpenComment, tokComment, tokWhitespace, tokEOF:
			continue
		case tokNL:
			if len(stack) == 0 {
				flush()
				continue
			}
		case tokPunct:
			if closer, ok := openers[t.Value]; ok {
				_ = closer
				stack = append(stack, t)
				if len(stack) > MaxDepth && !tooDeep {
					tooDeep = true
					p.errorf(t.Pos.Offset, t.Pos.Offset+1, "too-deep", "nesting too deep",
						"Brackets nest more than %d levels here; no pipe file needs that many.", MaxDepth)
				}
			} else if t.Value == "}" || t.Value == "]" || t.Value == ")" {
				if len(stack) == 0 {
					p.errorf(t.Pos.Offset, t.Pos.Offset+1, "unbalanced", fmt.Sprintf("unmatched %q", t.Value),
						"Nothing opened this %q. Remove it, or add the opening bracket it closes.", t.Value)
					continue
				}
				stack = stack[:len(stack)-1]
			}
		}
		cur = append(cur, t)
	}
	if len(stack) > 0 {
		open := stack[len(stack)-1]
		p.errorf(open.Pos.Offset, open.Pos.Offset+1, "unbalanced", fmt.Sprintf("unclosed %q", open.Value),
			"This %q is never closed. Add %q where it should end.", open.Value, openers[open.Value])
		// Parse what can be parsed: split the chunk at lines that start in
		// the first column, where a top-level statement would start.
		for _, part := range splitAtColumnOne(cur) {
			if balanced(part) {
				out = append(out, part)
			}
		}
		return out
	}
	flush()
	return out
}

// balanced reports whether every bracket in the chunk is closed.
func balanced(ch tokenChunk) bool {
	depth := 0
	for _, t := range ch {
		if t.Type != tokPunct {
			continue
		}
		switch t.Value {
		case "{", "[", "(":
			depth++
		case "}", "]", ")":
			depth--
			if depth < 0 {
				return false
			}
		}
	}
	return depth == 0
}

func splitAtColumnOne(ch tokenChunk) []tokenChunk {
	var parts []tokenChunk
	start := 0
	for i := 1; i < len(ch); i++ {
		if ch[i-1].Type == tokNL && ch[i].Pos.Column == 1 && ch[i].Type != tokNL && ch[i].Value != "}" {
			parts = append(parts, ch[start:i])
			start = i
		}
	}
	return append(parts, ch[start:])
}

// sliceLexer feeds a chunk of tokens to participle.
type sliceLexer struct {
	toks []lexer.Token
	eof  lexer.Position
	i    int
}

func (l *sliceLexer) Next() (lexer.Token, error) {
	if l.i >= len(l.toks) {
		return lexer.EOFToken(l.eof), nil
	}
	t := l.toks[l.i]
	l.i++
	return t, nil
}

func (p *parseState) parseTokens(ch tokenChunk) (*chunk, error) {
	last := ch[len(ch)-1]
	eof := last.Pos
	eof.Offset += len(last.Value)
	eof.Column += utf8.RuneCountInString(last.Value)
	peek, err := lexer.Upgrade(&sliceLexer{toks: ch, eof: eof})
	if err != nil {
		return nil, err
	}
	return parser.ParseFromLexer(peek)
}

// parseChunk parses one top-level chunk; on a syntax error it reports it and
// retries the parts of the chunk that start in the first column.
func (p *parseState) parseChunk(ch tokenChunk) []*ast.Stmt {
	g, err := p.parseTokens(ch)
	if err == nil {
		return p.lowerStmts(g.Stmts)
	}
	p.syntaxError(err)
	parts := splitAtColumnOne(ch)
	if len(parts) < 2 {
		return nil
	}
	var out []*ast.Stmt
	for _, part := range parts {
		if g, err := p.parseTokens(part); err == nil {
			out = append(out, p.lowerStmts(g.Stmts)...)
		}
	}
	return out
}

// syntaxError is the one place a participle error becomes a diagnostic.
func (p *parseState) syntaxError(err error) {
	var perr participle.Error
	if !errors.As(err, &perr) {
		p.errorf(0, 0, "syntax", "syntax error", "%v", err)
		return
	}
	pos := perr.Position()
	start, end := pos.Offset, pos.Offset
	var unexpected *participle.UnexpectedTokenError
	summary, detail := "syntax error", perr.Message()
	if errors.As(err, &unexpected) {
		tok := unexpected.Unexpected
		end = start + len(tok.Value)
		switch {
		case tok.EOF():
			summary = "unexpected end of statement"
			detail = "The statement stops before it is complete."
		case tok.Value == "\n" || tok.Value == "\r\n":
			summary = "unexpected end of line"
			detail = "The statement stops before it is complete. To continue a list or a chain on the next line, end the line with ',' or '->'."
			end = start
		default:
			summary = fmt.Sprintf("unexpected %q", tok.Value)
			detail = describeUnexpected(tok.Value)
		}
	}
	p.errorf(start, end, "syntax", summary, "%s", detail)
}

func describeUnexpected(v string) string {
	switch v {
	case "{":
		return "A body in braces must follow the words of a statement on the same line, as in 'train { epochs 5 }'."
	case ",":
		return "Commas separate the elements of a [list]; elsewhere words are separated by spaces."
	case ")":
		return "This ')' closes an empty or incomplete group."
	case "}":
		return "A statement in this block is incomplete."
	}
	return "This token cannot start or continue a statement here."
}

// --- lowering into package ast ---------------------------------------------

// span returns the byte range of the meaningful tokens of a node.
func span(toks []lexer.Token) (int, int) {
	first, last := -1, -1
	for i, t := range toks {
		if t.Type == tokNL || t.Type == tokWhitespace || t.Type == tokComment || t.EOF() {
			continue
		}
		if first < 0 {
			first = i
		}
		last = i
	}
	if first < 0 {
		return 0, 0
	}
	return toks[first].Pos.Offset, toks[last].Pos.Offset + len(toks[last].Value)
}

func (p *parseState) tokRange(toks []lexer.Token) diag.Range {
	s, e := span(toks)
	return p.rng(s, e)
}

func (p *parseState) lowerStmts(gs []*stmt) []*ast.Stmt {
	out := make([]*ast.Stmt, 0, len(gs))
	for _, g := range gs {
		if g == nil {
			continue
		}
		out = append(out, p.lowerStmt(g))
	}
	return out
}

func (p *parseState) lowerStmt(g *stmt) *ast.Stmt {
	s := &ast.Stmt{Range: p.tokRange(g.Tokens), Words: p.lowerWords(g.Words)}
	if len(s.Words) >= 2 {
		if id, ok := s.Words[0].(*ast.Ident); ok {
			if eq, ok := s.Words[1].(*ast.Punct); ok && eq.Op == "=" {
				s.Label = id
				s.Words = s.Words[2:]
			}
		}
	}
	if g.Body != nil {
		s.Body = &ast.Body{Range: p.tokRange(g.Body.Tokens), Stmts: p.lowerStmts(g.Body.Stmts)}
	}
	return s
}

func (p *parseState) lowerWords(gs []*word) []ast.Expr {
	out := make([]ast.Expr, 0, len(gs))
	for _, g := range gs {
		out = append(out, p.lowerWord(g))
	}
	return out
}

func (p *parseState) lowerWord(g *word) ast.Expr {
	r := p.tokRange(g.Tokens)
	switch {
	case g.Ident != nil:
		return &ast.Ident{Name: *g.Ident, Range: r}
	case g.Number != nil:
		return p.lowerNumber(*g.Number, r)
	case g.String != nil:
		v, err := strconv.Unquote(*g.String)
		if err != nil {
			p.diags = append(p.diags, diag.Errorf(r, "bad-string", "invalid escape in string",
				"Strings use Go escapes (\\\", \\\\, \\n, \\t, \\u00e9); this one holds an escape that is not one of them."))
			return &ast.Bad{Text: *g.String, Range: r}
		}
		return &ast.String{Value: v, Range: r}
	case g.Size != nil:
		return p.lowerSize(*g.Size, r)
	case g.List != nil:
		l := &ast.List{Range: r}
		for _, e := range g.List.Elems {
			l.Elems = append(l.Elems, &ast.Seq{Words: p.lowerWords(e.Words), Range: p.tokRange(e.Tokens)})
		}
		return l
	case g.Paren != nil:
		return &ast.Paren{Words: p.lowerWords(g.Paren.Words), Range: r}
	case g.Arrow:
		return &ast.Punct{Op: "->", Range: r}
	case g.Punct != nil:
		return &ast.Punct{Op: *g.Punct, Range: r}
	}
	return &ast.Bad{Range: r}
}

var numberParts = regexp.MustCompile(`^(-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(.*)$`)

func (p *parseState) lowerNumber(text string, r diag.Range) ast.Expr {
	m := numberParts.FindStringSubmatch(text)
	n := &ast.Number{Text: text, Unit: m[2], Range: r}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		p.diags = append(p.diags, diag.Errorf(r, "bad-number", "invalid number", "%q is not a number.", m[1]))
		return &ast.Bad{Text: text, Range: r}
	}
	if math.IsInf(v, 0) {
		p.diags = append(p.diags, diag.Errorf(r, "bad-number", "number out of range",
			"%s is larger than any value pipe can hold (about 1.8e308).", m[1]))
		return &ast.Bad{Text: text, Range: r}
	}
	n.Value = v
	if !strings.ContainsAny(m[1], ".eE") {
		if i, err := strconv.ParseInt(m[1], 10, 64); err == nil {
			n.IsInt, n.Int = true, i
		}
	}
	return n
}

func (p *parseState) lowerSize(text string, r diag.Range) ast.Expr {
	parts := strings.Split(text, "x")
	s := &ast.Size{Text: text, Range: r}
	for _, part := range parts {
		d, err := strconv.ParseInt(part, 10, 64)
		if err != nil {
			p.diags = append(p.diags, diag.Errorf(r, "bad-number", "size out of range",
				"Each extent of %s must fit in 64 bits.", text))
			return &ast.Bad{Text: text, Range: r}
		}
		s.Dims = append(s.Dims, d)
	}
	return s
}
