package lsp

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"go.lsp.dev/protocol"

	"pipe/lang"
	"pipe/lang/syntax"
)

// Completion works on tokens, not on the syntax tree: the text being typed
// rarely parses. The tokens before the cursor are replayed to find where it
// stands — at the top of the file, in which block (and which variant of
// it), in which statement, after which field or layer — and the registry
// says what may come next there. Names the file declares (sources, models,
// devices, tensor labels) are offered where a reference is expected.

// cursor is what the tokens before the cursor say about where it stands.
type cursor struct {
	// block is the innermost enclosing block's header ("source", "train",
	// "x", "idx"), nil at the top of the file.
	block []syntax.Token
	// stmt are the significant tokens of the statement being written,
	// before the word under the cursor, brackets included.
	stmt []syntax.Token
	// bracket is the innermost unclosed "[" or "(" inside the statement,
	// with the token before it; open is "" when there is none.
	open       string
	beforeOpen *syntax.Token
	// labels are the tensor labels written so far in the enclosing model.
	labels []string
	// siblings are the other statements of the enclosing block (or of the
	// top of the file), before and after the cursor's: what they set is
	// not offered again.
	siblings [][]syntax.Token
}

// decls are the names a file declares at its top level.
type decls struct {
	sources, models, devices []string
}

type frame struct {
	open   string
	header []syntax.Token // "{": the statement before it; "[", "(": the token before it
	labels []string
	// stmts are the statements of a "{" block ended so far, ids their
	// numbers.
	stmts [][]syntax.Token
	ids   []int
}

// locate replays toks to find where the byte offset end stands, then
// reads on to the end of the block it stands in, for the block's other
// statements.
//
// Statements end at a newline or ";" outside brackets, except after
// "->". A "[" is taken as left open, and its statement as ended, when a
// line ends after one of its elements and the next line does not go on
// with "," or "]": otherwise one unclosed "[" would swallow the rest of
// the file.
func locate(toks []syntax.Token, end int) *cursor {
	top := &frame{open: "{"}
	var stack []*frame
	var stmt []syntax.Token
	var labels []string
	id, nextID := 0, 1
	leftOpen := false // a line ended after an element of the innermost "["
	var c *cursor
	var home *frame
	homeID := -1
	inBracket := func() bool {
		return len(stack) > 0 && stack[len(stack)-1].open != "{"
	}
	block := func() *frame {
		for i := len(stack) - 1; i >= 0; i-- {
			if stack[i].open == "{" {
				return stack[i]
			}
		}
		return top
	}
	endStmt := func() {
		if len(stmt) > 0 {
			b := block()
			b.stmts = append(b.stmts, stmt)
			b.ids = append(b.ids, id)
		}
		stmt, id, nextID = nil, nextID, nextID+1
	}
	closeLeftOpen := func() {
		leftOpen = false
		for inBracket() {
			stack = stack[:len(stack)-1]
		}
		endStmt()
	}
	for i, t := range toks {
		if c == nil && (t.End > end || t.Kind == syntax.KindEOF) {
			if leftOpen && !continuesList(toks[i:], end) {
				closeLeftOpen()
			}
			c = snapshot(stack, stmt, labels)
			home, homeID = block(), id
		}
		if t.Kind == syntax.KindEOF {
			break
		}
		switch t.Kind {
		case syntax.KindSpace, syntax.KindComment, syntax.KindOpenComment, syntax.KindInvalid:
			continue
		case syntax.KindNewline:
			if inBracket() {
				if last := len(stmt) - 1; last >= 0 && stack[len(stack)-1].open == "[" && stmt[last].Text != "," && stmt[last].Text != "[" {
					leftOpen = true
				}
				continue
			}
			if len(stmt) > 0 && stmt[len(stmt)-1].Kind == syntax.KindArrow {
				continue
			}
			endStmt()
			continue
		}
		if leftOpen {
			if t.Text == "]" || t.Text == "," {
				leftOpen = false
			} else {
				closeLeftOpen()
			}
		}
		switch t.Text {
		case ";":
			if !inBracket() {
				endStmt()
				continue
			}
		case "{":
			stack = append(stack, &frame{open: "{", header: stmt, labels: labels})
			stmt, labels = nil, nil
			id, nextID = nextID, nextID+1
			continue
		case "}":
			endStmt()
			for len(stack) > 0 {
				f := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				if f.open == "{" {
					labels = f.labels
					break
				}
			}
			continue
		case "[", "(":
			var before []syntax.Token
			if len(stmt) > 0 {
				before = stmt[len(stmt)-1:]
			}
			stack = append(stack, &frame{open: t.Text, header: before})
		case "]", ")":
			if inBracket() {
				stack = stack[:len(stack)-1]
			}
		case "=":
			if len(stmt) == 1 && stmt[0].Kind == syntax.KindIdent && !inBracket() {
				labels = append(labels, stmt[0].Text)
			}
		}
		stmt = append(stmt, t)
	}
	if c == nil {
		c = snapshot(stack, stmt, labels)
		home, homeID = block(), id
	}
	endStmt()
	for k, s := range home.stmts {
		if home.ids[k] != homeID {
			c.siblings = append(c.siblings, s)
		}
	}
	return c
}

// continuesList reports whether the first significant token at or after
// the cursor, past the word being typed, goes on with a list: "," or "]".
func continuesList(toks []syntax.Token, end int) bool {
	for _, t := range toks {
		switch {
		case t.Kind == syntax.KindSpace || t.Kind == syntax.KindNewline || t.Kind == syntax.KindComment || t.Kind == syntax.KindOpenComment:
			continue
		case t.Start == end && (t.Kind == syntax.KindIdent || t.Kind == syntax.KindNumber):
			continue // the word being typed
		}
		return t.Text == "]" || t.Text == ","
	}
	return false
}

// snapshot is the cursor for the replay's state.
func snapshot(stack []*frame, stmt []syntax.Token, labels []string) *cursor {
	c := &cursor{stmt: stmt, labels: labels}
	for i := len(stack) - 1; i >= 0; i-- {
		f := stack[i]
		if f.open == "{" {
			c.block = f.header
			break
		}
		if c.open == "" {
			c.open = f.open
			if len(f.header) > 0 {
				c.beforeOpen = &f.header[0]
			}
		}
	}
	return c
}

// declared collects the names of the file's source, model and device
// blocks.
func declared(toks []syntax.Token) decls {
	var d decls
	depth := 0
	var stmt []syntax.Token
	for _, t := range toks {
		switch t.Kind {
		case syntax.KindSpace, syntax.KindComment, syntax.KindOpenComment:
			continue
		case syntax.KindNewline:
			if depth == 0 {
				stmt = nil
			}
			continue
		}
		switch t.Text {
		case "{":
			if depth == 0 && len(stmt) >= 2 && stmt[1].Kind == syntax.KindIdent {
				switch stmt[0].Text {
				case "source":
					d.sources = append(d.sources, stmt[1].Text)
				case "model":
					d.models = append(d.models, stmt[1].Text)
				case "device":
					d.devices = append(d.devices, stmt[1].Text)
				}
			}
			depth++
			stmt = nil
			continue
		case "}":
			depth = max(0, depth-1)
			stmt = nil
			continue
		}
		if depth == 0 {
			stmt = append(stmt, t)
		}
	}
	return d
}

// completer builds the items for one request.
type completer struct {
	schema lang.Schema
	decls  decls
	cur    *cursor
	items  []protocol.CompletionItem
	seen   map[string]bool
	edit   protocol.Range
	prefix string
}

// complete returns the completions at pos in text.
func complete(schema lang.Schema, text string, pos protocol.Position) *protocol.CompletionList {
	list := &protocol.CompletionList{Items: []protocol.CompletionItem{}}
	if len(text) > syntax.MaxFileSize {
		return list
	}
	m := newMapper(text)
	off := m.offset(pos)
	toks := syntax.Tokens(text)
	wordStart := off
	for _, t := range toks {
		if t.Start >= off {
			break
		}
		if off > t.Start && off <= t.End {
			switch t.Kind {
			case syntax.KindComment, syntax.KindOpenComment, syntax.KindString, syntax.KindOpenString:
				open := t.Kind == syntax.KindOpenComment || t.Kind == syntax.KindOpenString ||
					(t.Kind == syntax.KindComment && strings.HasPrefix(t.Text, "//"))
				if off < t.End || open {
					return list // inside a comment or a string
				}
			case syntax.KindIdent, syntax.KindNumber:
				wordStart = t.Start
			}
		}
	}
	c := &completer{
		schema: schema,
		decls:  declared(toks),
		cur:    locate(toks, wordStart),
		seen:   map[string]bool{},
		edit:   m.byteRange(wordStart, off),
		prefix: text[wordStart:off],
	}
	c.run()
	list.Items = c.items
	return list
}

func (c *completer) add(label string, kind protocol.CompletionItemKind, rank int, detail, doc string) {
	if label == "" || c.seen[label] {
		return
	}
	c.seen[label] = true
	item := protocol.CompletionItem{
		Label:    label,
		Kind:     kind,
		Detail:   detail,
		SortText: fmt.Sprintf("%d_%s", rank, label),
		TextEdit: &protocol.TextEdit{Range: c.edit, NewText: label},
	}
	if doc != "" {
		item.Documentation = protocol.MarkupContent{Kind: protocol.Markdown, Value: doc}
	}
	c.items = append(c.items, item)
}

// Ranks order the items: what the cursor's field or layer takes first.
const (
	rankValue = iota
	rankArg
	rankField
	rankLayer
	rankOther
)

func (c *completer) run() {
	if c.cur.block == nil {
		c.top()
		return
	}
	head := c.cur.block[0].Text
	spec := c.schema.Block(head)
	if spec == nil {
		return
	}
	if spec.Body == lang.BodyModel {
		c.model(spec)
		return
	}
	variant := ""
	if len(spec.Variants) > 0 && 1+spec.VariantLabel < len(c.cur.block) {
		variant = c.cur.block[1+spec.VariantLabel].Text
	}
	c.fields(spec.FieldsFor(variant), c.cur.stmt)
}

// top completes at the top level of the file.
func (c *completer) top() {
	stmt := c.cur.stmt
	if len(stmt) == 0 {
		for _, name := range c.schema.BlockNames() {
			b := c.schema.Block(name)
			c.add(name, protocol.CompletionItemKindKeyword, rankField, "block", blockDoc(b))
		}
		set := c.setFields(c.schema.TopFields(), nil)
		for _, f := range c.schema.TopFields() {
			if !set[f.Name] {
				c.add(f.Name, protocol.CompletionItemKindProperty, rankField, "setting", fieldDoc(f))
			}
		}
		return
	}
	if b := c.schema.Block(stmt[0].Text); b != nil && findFieldSpec(c.schema.TopFields(), stmt[0].Text) == nil {
		// The labels of a block header: source NAME KIND {.
		k := len(stmt) - 1
		if k < len(b.Labels) {
			for _, v := range b.Labels[k].Enum {
				c.add(v, protocol.CompletionItemKindEnumMember, rankValue, b.Name+" "+b.Labels[k].Name, "")
			}
		}
		return
	}
	c.fields(c.schema.TopFields(), stmt)
}

// fields completes a statement of a block whose statements are fields;
// several fields may share a line. A field set already, on this line or
// another of the block, is not offered again.
func (c *completer) fields(specs []*lang.FieldSpec, stmt []syntax.Token) {
	cur, start := currentField(specs, stmt)
	if cur == nil {
		if len(stmt) == 0 || start < 0 {
			set := c.setFields(specs, nil)
			for _, f := range specs {
				if !set[f.Name] {
					c.add(f.Name, protocol.CompletionItemKindProperty, rankField, "setting", fieldDoc(f))
				}
			}
		}
		return
	}
	given := stmt[start+1:]
	c.args(cur.Name, cur.Args, given)
	if len(given) > 0 && c.cur.open == "" && !c.waitsForValue(cur, given) {
		// Another field may follow on the same line.
		set := c.setFields(specs, stmt)
		for _, f := range specs {
			if !set[f.Name] {
				c.add(f.Name, protocol.CompletionItemKindProperty, rankField, "setting", fieldDoc(f))
			}
		}
	}
}

// setFields names the fields that stmt and the block's other statements
// set.
func (c *completer) setFields(specs []*lang.FieldSpec, stmt []syntax.Token) map[string]bool {
	set := map[string]bool{}
	for _, s := range append([][]syntax.Token{stmt}, c.cur.siblings...) {
		for _, f := range fieldStarts(specs, s) {
			set[f.Name] = true
		}
	}
	return set
}

// currentField finds the field the end of stmt belongs to, with the
// checker's rule: a word that names a field starts a new one, unless the
// field before waits for its first value or takes that word as an
// argument. start is the index of the field's name; -1 when stmt does not
// start with a field.
func currentField(specs []*lang.FieldSpec, stmt []syntax.Token) (*lang.FieldSpec, int) {
	if len(stmt) == 0 {
		return nil, 0
	}
	var cur *lang.FieldSpec
	start := -1
	fieldsOf(specs, stmt, func(f *lang.FieldSpec, j int) { cur, start = f, j })
	return cur, start
}

// fieldStarts lists the fields a statement sets.
func fieldStarts(specs []*lang.FieldSpec, stmt []syntax.Token) []*lang.FieldSpec {
	var out []*lang.FieldSpec
	fieldsOf(specs, stmt, func(f *lang.FieldSpec, _ int) { out = append(out, f) })
	return out
}

// fieldsOf calls yield with each field stmt sets and the index of its
// name, by the checker's rule (currentField).
func fieldsOf(specs []*lang.FieldSpec, stmt []syntax.Token, yield func(*lang.FieldSpec, int)) {
	if len(stmt) == 0 {
		return
	}
	cur := findFieldSpec(specs, stmt[0].Text)
	if cur == nil {
		return
	}
	yield(cur, 0)
	start := 0
	depth := 0
	for j := 1; j < len(stmt); j++ {
		t := stmt[j]
		switch t.Text {
		case "[", "(":
			depth++
		case "]", ")":
			depth--
		}
		if depth > 0 || t.Kind != syntax.KindIdent {
			continue
		}
		next := findFieldSpec(specs, t.Text)
		if next == nil {
			continue
		}
		if j == start+1 && hasPositionalArg(cur) {
			continue
		}
		if cur.Arg(t.Text) != nil {
			continue
		}
		cur, start = next, j
		yield(cur, j)
	}
}

func findFieldSpec(specs []*lang.FieldSpec, name string) *lang.FieldSpec {
	for _, f := range specs {
		if f.Name == name {
			return f
		}
	}
	return nil
}

func hasPositionalArg(f *lang.FieldSpec) bool {
	for _, a := range f.Args {
		if a.Positional {
			return true
		}
	}
	return false
}

// args completes the arguments of a field or layer named owner, given the
// words written after its name.
func (c *completer) args(owner string, specs []*lang.ArgSpec, given []syntax.Token) {
	if ka := lang.KindArg(specs); ka != nil && len(given) > 0 && slices.Contains(ka.Choices(), given[0].Text) {
		// "optimizer sgd |": only what sgd takes.
		specs = lang.ArgsOfKind(specs, given[0].Text)
	}
	if c.cur.open == "[" {
		// Inside a list: the elements of the list argument being written.
		for _, a := range specs {
			if a.Type == lang.TList {
				c.values(owner, a)
				return
			}
		}
		return
	}
	if len(given) > 0 {
		last := given[len(given)-1]
		if a := lang.FindArg(specs, last.Text); a != nil && last.Kind == syntax.KindIdent && a.Type != lang.TBool {
			c.values(owner, a) // "optimizer adam lr |": lr's value
			return
		}
	}
	used := map[string]bool{}
	positional := 0
	for _, t := range given {
		if t.Kind != syntax.KindIdent {
			if t.Kind == syntax.KindNumber || t.Kind == syntax.KindString || t.Kind == syntax.KindSize || t.Text == "[" {
				positional++
			}
			continue
		}
		if a := lang.FindArg(specs, t.Text); a != nil {
			used[a.Name] = true
			continue
		}
		if m := gluedName(t.Text); m != "" {
			if a := lang.FindArg(specs, m); a != nil {
				used[a.Name] = true
				continue
			}
		}
		positional++
	}
	k := 0
	for _, a := range specs {
		if !a.Positional {
			continue
		}
		if k == positional && !used[a.Name] {
			c.values(owner, a)
			if a.Required {
				return // its value comes first: "optimizer |" wants the kind
			}
		}
		k++
	}
	for _, a := range specs {
		if a.Positional && !a.Glued || used[a.Name] {
			continue
		}
		c.add(a.Name, protocol.CompletionItemKindProperty, rankArg, "argument of "+owner, argDoc(a))
	}
}

// waitsForValue reports whether the last word given is the name of an
// argument that still needs its value ("lr |").
func (c *completer) waitsForValue(f *lang.FieldSpec, given []syntax.Token) bool {
	last := given[len(given)-1]
	a := lang.FindArg(f.Args, last.Text)
	return a != nil && last.Kind == syntax.KindIdent && a.Type != lang.TBool
}

// gluedName returns "k" for "k3": the name part of a glued argument.
func gluedName(word string) string {
	i := len(word)
	for i > 0 && word[i-1] >= '0' && word[i-1] <= '9' {
		i--
	}
	if i == 0 || i == len(word) {
		return ""
	}
	return word[:i]
}

// values offers the values an argument accepts where they are names.
func (c *completer) values(owner string, a *lang.ArgSpec) {
	detail := a.Name + " of " + owner
	for _, v := range a.Choices() {
		c.add(v, protocol.CompletionItemKindEnumMember, rankValue, detail, "")
	}
	if a.Auto {
		c.add("auto", protocol.CompletionItemKindKeyword, rankValue, detail, "The planner decides.")
	}
	switch a.Type {
	case lang.TBool:
		c.add("true", protocol.CompletionItemKindKeyword, rankValue, detail, "")
		c.add("false", protocol.CompletionItemKindKeyword, rankValue, detail, "")
	case lang.TName:
		var names []string
		switch {
		case owner == "device":
			names = append(append(names, c.schema.DeviceNames()...), c.decls.devices...)
		case a.Name == "source":
			names = c.decls.sources
		case a.Name == "model":
			names = c.decls.models
		}
		for _, n := range names {
			c.add(n, protocol.CompletionItemKindReference, rankValue, detail, "")
		}
	case lang.TTensor:
		for _, l := range c.cur.labels {
			c.add(l, protocol.CompletionItemKindVariable, rankValue, "tensor label", "")
		}
	}
}

// model completes inside a model body: fields, layers, their arguments,
// and the family arguments of a model named after a family.
func (c *completer) model(spec *lang.BlockSpec) {
	var family *lang.LayerSpec
	if len(c.cur.block) > 1 {
		if l := c.schema.Layer(c.cur.block[1].Text); l != nil && l.Family {
			family = l
		}
	}
	stmt := c.cur.stmt
	// The segment is the part of the chain after the last "->", "=", "*"
	// or opening parenthesis: the layer being written.
	seg := stmt
	var sep *syntax.Token
	depth := 0
	for i := len(stmt) - 1; i >= 0; i-- {
		t := stmt[i]
		switch t.Text {
		case ")", "]":
			depth++
		case "[":
			depth--
		case "(":
			if depth == 0 {
				seg, sep = stmt[i+1:], &stmt[i]
			}
			depth--
		case "->", "=", "*":
			if depth == 0 {
				seg, sep = stmt[i+1:], &stmt[i]
			}
		}
		if sep != nil {
			break
		}
	}
	if len(seg) == 0 {
		switch {
		case sep == nil:
			// The start of a statement: what the model does not set yet.
			set := c.setFields(spec.Fields, nil)
			for _, f := range spec.Fields {
				if !set[f.Name] {
					c.add(f.Name, protocol.CompletionItemKindProperty, rankField, "setting of model", fieldDoc(f))
				}
			}
			c.familyArgs(family, nil)
			c.labelNames()
		case sep.Text == "(" && c.cur.beforeOpen != nil && takesTensor(c.schema.Layer(c.cur.beforeOpen.Text)):
			c.labelNames() // add(| : a branch starts from a label
			return
		}
		c.layers()
		return
	}
	head := seg[0]
	if l := c.schema.Layer(head.Text); l != nil && head.Kind == syntax.KindIdent {
		c.args(l.Name, l.Args, seg[1:])
		return
	}
	if sep == nil && family != nil {
		// model unet { input [3, 64, 64]  depth 4 |: the family's
		// arguments, which may follow the model's fields on a line.
		for i, t := range seg {
			if t.Kind != syntax.KindIdent || lang.FindArg(family.Args, t.Text) == nil || c.schema.Layer(t.Text) != nil {
				continue
			}
			if i > 0 && findFieldSpec(spec.Fields, head.Text) == nil {
				break
			}
			given := seg[i:]
			last := given[len(given)-1]
			if a := lang.FindArg(family.Args, last.Text); a != nil && last.Kind == syntax.KindIdent && a.Type != lang.TBool {
				c.values(family.Name, a) // "encoder |"
				return
			}
			if c.cur.open == "" {
				c.familyArgs(family, given)
			}
			return
		}
	}
	if sep == nil {
		if f := findFieldSpec(spec.Fields, head.Text); f != nil {
			c.args(f.Name, f.Args, seg[1:])
			return
		}
	}
}

// familyArgs offers the arguments of the family a model is named after,
// but those that given (the statement being written) or the model's other
// statements set.
func (c *completer) familyArgs(family *lang.LayerSpec, given []syntax.Token) {
	if family == nil {
		return
	}
	set := map[string]bool{}
	for _, s := range append([][]syntax.Token{given}, c.cur.siblings...) {
		depth := 0
		for _, t := range s {
			switch t.Text {
			case "[", "(":
				depth++
			case "]", ")":
				depth--
			}
			if a := lang.FindArg(family.Args, t.Text); a != nil && depth == 0 && t.Kind == syntax.KindIdent {
				set[a.Name] = true
			}
		}
	}
	for _, a := range family.Args {
		if !set[a.Name] {
			c.add(a.Name, protocol.CompletionItemKindProperty, rankArg, "argument of "+family.Name, argDoc(a))
		}
	}
}

func (c *completer) labelNames() {
	for _, l := range c.cur.labels {
		c.add(l, protocol.CompletionItemKindVariable, rankValue, "tensor label", "")
	}
}

func (c *completer) layers() {
	names := append([]string(nil), c.schema.LayerNames()...)
	sort.Strings(names)
	for _, n := range names {
		l := c.schema.Layer(n)
		if l == nil {
			continue
		}
		kind, detail := protocol.CompletionItemKindFunction, "layer"
		if l.Family {
			kind, detail = protocol.CompletionItemKindModule, "model family"
		}
		if l.Name != n {
			detail = "alias of " + l.Name
		}
		c.add(n, kind, rankLayer, detail, layerDoc(l))
	}
}

func takesTensor(l *lang.LayerSpec) bool {
	if l == nil {
		return false
	}
	for _, a := range l.Args {
		if a.Type == lang.TTensor {
			return true
		}
	}
	return false
}
