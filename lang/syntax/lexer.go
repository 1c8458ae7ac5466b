package syntax

import (
	"github.com/alecthomas/participle/v2/lexer"
)

// Rules are the token classes of the language, tried in order. The lexer
// never fails: a byte no rule takes becomes an Invalid token, and an
// unterminated string or block comment becomes its own token, so the parser
// can report it with a position and go on.
var Rules = []lexer.SimpleRule{
	{Name: "Comment", Pattern: `//[^\n]*|/\*([^*]|\*+[^*/])*\*+/`},
	{Name: "OpenComment", Pattern: `/\*([^*]|\*+[^*/])*\**`},
	{Name: "String", Pattern: `"(\\.|[^"\\\n])*"`},
	{Name: "OpenString", Pattern: `"(\\.|[^"\\\n])*`},
	{Name: "Size", Pattern: `\d+(x\d+)+\b`},
	{Name: "Number", Pattern: `-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?([A-Za-z%]+(/s)?)?`},
	// A word with a character that belongs in no name (a symbol, an
	// emoji) is one token, so that the mistake is reported once and the
	// rest of the statement still parses (Parse reads it as a name).
	{Name: "BadIdent", Pattern: `[\p{L}\p{N}_]*[^\x00-\x7F\p{L}\p{N}\p{Z}\x{FEFF}][^\s{}\[\](),;=*+"]*`},
	// Names are letters (any script), digits and _, and may join parts
	// with - or : (cuda:0, a100-80gb).
	{Name: "Ident", Pattern: `[\p{L}_][\p{L}\p{N}_]*([-:][\p{L}\p{N}_]+)*`},
	{Name: "Arrow", Pattern: `->`},
	{Name: "Punct", Pattern: `[{}\[\](),;=*:+-]`},
	{Name: "NL", Pattern: `\r?\n`},
	{Name: "Whitespace", Pattern: `[ \t\f\r\x{FEFF}]+`},
	{Name: "Invalid", Pattern: `.`},
}

// Lexer is the lexer definition shared by the parser and the formatter.
var Lexer = lexer.MustSimple(Rules)

// Token kinds, looked up once from the lexer's symbol table.
var (
	tokComment     = Lexer.Symbols()["Comment"]
	tokOpenComment = Lexer.Symbols()["OpenComment"]
	tokString      = Lexer.Symbols()["String"]
	tokOpenString  = Lexer.Symbols()["OpenString"]
	tokSize        = Lexer.Symbols()["Size"]
	tokNumber      = Lexer.Symbols()["Number"]
	tokIdent       = Lexer.Symbols()["Ident"]
	tokBadIdent    = Lexer.Symbols()["BadIdent"]
	tokArrow       = Lexer.Symbols()["Arrow"]
	tokPunct       = Lexer.Symbols()["Punct"]
	tokNL          = Lexer.Symbols()["NL"]
	tokWhitespace  = Lexer.Symbols()["Whitespace"]
	tokInvalid     = Lexer.Symbols()["Invalid"]
	tokEOF         = lexer.EOF
)

// Kind names a token class for tools outside this package (the formatter,
// the language server).
type Kind int

// Token classes.
const (
	KindEOF Kind = iota
	KindComment
	KindOpenComment
	KindString
	KindOpenString
	KindSize
	KindNumber
	KindIdent
	KindArrow
	KindPunct
	KindNewline
	KindSpace
	KindInvalid
)

// Token is one lexeme with its byte offsets in the source. End is exclusive.
type Token struct {
	Kind  Kind
	Text  string
	Start int
	End   int
}

func kindOf(t lexer.TokenType) Kind {
	switch t {
	case tokComment:
		return KindComment
	case tokOpenComment:
		return KindOpenComment
	case tokString:
		return KindString
	case tokOpenString:
		return KindOpenString
	case tokSize:
		return KindSize
	case tokNumber:
		return KindNumber
	case tokIdent:
		return KindIdent
	case tokArrow:
		return KindArrow
	case tokPunct:
		return KindPunct
	case tokNL:
		return KindNewline
	case tokWhitespace:
		return KindSpace
	case tokInvalid, tokBadIdent:
		return KindInvalid
	}
	return KindEOF
}

// Tokens lexes src completely, whitespace and comments included. The last
// token is KindEOF. src is expected to be valid UTF-8 without a byte order
// mark; Parse checks both before it lexes.
func Tokens(src string) []Token {
	raw := lexAll(src)
	out := make([]Token, len(raw))
	for i, t := range raw {
		out[i] = Token{Kind: kindOf(t.Type), Text: t.Value, Start: t.Pos.Offset, End: t.Pos.Offset + len(t.Value)}
	}
	return out
}

func lexAll(src string) []lexer.Token {
	lx, err := Lexer.LexString("", src)
	if err != nil {
		// The Invalid rule matches any rune, so the lexer cannot fail.
		panic("syntax: lexer failed: " + err.Error())
	}
	toks, err := lexer.ConsumeAll(lx)
	if err != nil {
		panic("syntax: lexer failed: " + err.Error())
	}
	return toks
}
