package syntax

import (
	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
)

// The grammar structs below are participle's view of the language, one per
// production, and never leave this package: Parse lowers them into package
// ast. The grammar is deliberately loose (a statement is any run of words);
// the checker gives the words their meaning.

// chunk is a run of statements separated by newlines or semicolons. It is
// the root of one top-level chunk (see parse.go for how a file is chunked).
type chunk struct {
	Tokens []lexer.Token

	Stmts []*stmt `parser:"( NL | ';' )* ( @@ ( ( NL | ';' )+ @@? )* )?"`
}

type stmt struct {
	Tokens []lexer.Token

	Words []*word `parser:"@@+"`
	Body  *body   `parser:"@@?"`
}

type body struct {
	Tokens []lexer.Token

	Stmts []*stmt `parser:"'{' ( NL | ';' )* ( @@ ( ( NL | ';' )+ @@? )* )? '}'"`
}

type word struct {
	Tokens []lexer.Token

	Ident  *string `parser:"  @Ident"`
	Number *string `parser:"| @Number"`
	String *string `parser:"| @String"`
	Size   *string `parser:"| @Size"`
	List   *list   `parser:"| @@"`
	Paren  *paren  `parser:"| @@"`
	Arrow  bool    `parser:"| @Arrow NL*"`
	Punct  *string `parser:"| @( '=' | '*' | ':' | '+' | '-' )"`
}

type list struct {
	Tokens []lexer.Token

	Elems []*seq `parser:"'[' NL* ( @@ NL* ( ',' NL* @@ NL* )* ','? NL* )? ']'"`
}

type seq struct {
	Tokens []lexer.Token

	Words []*word `parser:"@@+"`
}

type paren struct {
	Tokens []lexer.Token

	Words []*word `parser:"'(' NL* ( @@ NL* )* ')'"`
}

var parser = participle.MustBuild[chunk](
	participle.Lexer(Lexer),
	participle.Elide("Whitespace", "Comment"),
	participle.UseLookahead(2),
)

// EBNF returns the grammar in EBNF, as participle prints it. A golden file
// keeps every change to the grammar visible in review.
func EBNF() string { return parser.String() }
