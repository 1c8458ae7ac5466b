package lsp

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.lsp.dev/protocol"

	"pipe/diag"
	"pipe/lang"
	"pipe/lang/syntax"
)

// hover describes the word under the cursor. On a layer it shows the
// layer's output shape, its parameters and the activation memory it keeps
// for the backward pass, from the planner for the file's device when there
// is a plan and from the model's graph otherwise; on a model's name, the
// model's totals; on a block, field or argument, its documentation; on a
// value, what it is a value of and what it amounts to (describe.go).
func (s *server) hover(ctx context.Context, params protocol.HoverParams) (*protocol.Hover, error) {
	an, text, ok := s.current(ctx, params.TextDocument.URI, true)
	if !ok {
		return nil, unknownDocument(params.TextDocument.URI)
	}
	m := newMapper(text)
	off := m.offset(params.Position)
	tok, ok := tokenAt(text, off)
	if !ok {
		return nil, nil
	}
	var md string
	if an != nil && an.text == text && an.prog != nil {
		md = describeAt(s.cfg.schema, an, off)
	}
	if md == "" {
		md = describeWord(s.cfg.schema, tok)
	}
	if md == "" {
		return nil, nil
	}
	r := m.byteRange(tok.Start, tok.End)
	return &protocol.Hover{Contents: protocol.MarkupContent{Kind: protocol.Markdown, Value: md}, Range: &r}, nil
}

// tokenAt returns the word under the byte offset: a name, a number, a
// size or a string.
func tokenAt(text string, off int) (syntax.Token, bool) {
	if len(text) > syntax.MaxFileSize {
		return syntax.Token{}, false
	}
	for _, t := range syntax.Tokens(text) {
		if t.Start > off {
			break
		}
		if off >= t.Start && off < t.End {
			switch t.Kind {
			case syntax.KindIdent, syntax.KindNumber, syntax.KindSize, syntax.KindString:
				return t, true
			}
		}
	}
	return syntax.Token{}, false
}

// describeAt describes what the checked program has at the offset.
func describeAt(schema lang.Schema, an *analysis, off int) string {
	p := an.prog
	tok, _ := tokenAt(an.text, off)
	if call := layerCallAt(p, off); call != nil {
		return layerHover(call, an.costs, an.planned)
	}
	if call := callAround(p, off); call != nil && call.Spec != nil {
		if md := describeArgs(layerArgs(call), an.text, tok, off); md != "" {
			return md
		}
	}
	for _, m := range p.Models {
		if in(m.NameRange, off) {
			return modelHover(m, an.costs, an.planned)
		}
	}
	blocks := append([]*lang.Block{p.Top}, p.Blocks...)
	for _, b := range blocks {
		if b.Kind != "" && in(b.KindRange, off) {
			return blockDoc(b.Spec)
		}
		for _, l := range b.Labels {
			if in(l.Range, off) {
				return labelDoc(b, l)
			}
		}
		for _, f := range b.Fields {
			if in(f.NameRange, off) {
				return fieldDoc(f.Spec)
			}
			if in(f.Range, off) {
				return describeArgs(argOwner{name: f.Name, doc: f.Spec.Doc, specs: f.Spec.Args, args: f.Args}, an.text, tok, off)
			}
		}
		if b.Model != nil && in(b.Range, off) {
			// model unet { depth 4 }: the family's arguments.
			if call := familyCall(b.Model); call != nil {
				if md := describeArgs(layerArgs(call), an.text, tok, off); md != "" {
					return md
				}
			}
		}
	}
	return ""
}

// callAround finds the innermost layer call whose source holds the
// offset: the call whose arguments are under the cursor.
func callAround(p *lang.Program, off int) *lang.LayerCall {
	var found *lang.LayerCall
	for _, m := range p.Models {
		for _, n := range m.Calls() {
			if in(n.Range, off) && (found == nil || n.Range.End.Byte-n.Range.Start.Byte < found.Range.End.Byte-found.Range.Start.Byte) {
				found = n
			}
		}
	}
	return found
}

// familyCall returns the call a model named after a family makes of it,
// with the arguments its body sets; nil for a model of layers.
func familyCall(m *lang.Model) *lang.LayerCall {
	if len(m.Stmts) != 1 || m.Stmts[0].Chain == nil || len(m.Stmts[0].Chain.Nodes) != 1 {
		return nil
	}
	call, ok := m.Stmts[0].Chain.Nodes[0].(*lang.LayerCall)
	if !ok || call.Spec == nil || !call.Spec.Family || call.NameRange != m.NameRange {
		return nil
	}
	return call
}

// layerArgs is a layer call as the owner of its arguments.
func layerArgs(call *lang.LayerCall) argOwner {
	return argOwner{name: call.Name, doc: call.Spec.Doc, specs: call.Spec.Args, args: call.Args}
}

// layerCallAt finds the layer call whose name is at the offset, or the
// innermost call whose arguments are, to describe an argument name.
func layerCallAt(p *lang.Program, off int) *lang.LayerCall {
	// Calls puts a branch's calls after the call that takes them, so the
	// last match is the innermost.
	var found *lang.LayerCall
	for _, m := range p.Models {
		for _, n := range m.Calls() {
			if in(n.NameRange, off) {
				found = n
			}
		}
	}
	return found
}

func in(r diag.Range, off int) bool { return !r.IsZero() && off >= r.Start.Byte && off < r.End.Byte }

func layerHover(call *lang.LayerCall, costs *Costs, planned bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s**", call.Name)
	if call.Spec != nil {
		if call.Spec.Family {
			b.WriteString(" (model family)")
		}
		fmt.Fprintf(&b, " — %s\n\n", call.Spec.Doc)
	} else {
		b.WriteString("\n\n")
	}
	var lc *LayerCost
	if costs != nil {
		for i := range costs.Layers {
			l := &costs.Layers[i]
			if l.Range.Start.Byte == call.Range.Start.Byte && l.Range.End.Byte == call.Range.End.Byte {
				lc = l
			}
		}
	}
	if lc == nil {
		b.WriteString("_No shape yet: the model does not build up to this layer._")
		return b.String()
	}
	writeCosts(&b, costs, lc.Out, lc.Params, lc.ActivationBytes, lc.Copies, planned)
	return b.String()
}

func modelHover(m *lang.Model, costs *Costs, planned bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**model %s**\n\n", m.Name)
	if costs == nil {
		return b.String()
	}
	var params, act int64
	var out []int64
	lastEnd := -1
	for _, l := range costs.Layers {
		if l.Range.Start.Byte < m.Range.Start.Byte || l.Range.End.Byte > m.Range.End.Byte {
			continue
		}
		params = satAdd(params, l.Params)
		act = satAdd(act, l.ActivationBytes)
		if l.Range.End.Byte > lastEnd {
			lastEnd, out = l.Range.End.Byte, l.Out
		}
	}
	if lastEnd < 0 {
		b.WriteString("_No layers built yet._")
		return b.String()
	}
	if m.Input != nil {
		fmt.Fprintf(&b, "- input: `%s`\n", shape(m.Input))
	}
	writeCosts(&b, costs, out, params, act, 1, planned)
	return b.String()
}

func writeCosts(b *strings.Builder, costs *Costs, out []int64, params, act int64, copies int, planned bool) {
	fmt.Fprintf(b, "- output: `%s` per sample\n", shape(out))
	fmt.Fprintf(b, "- parameters: %s", count(params))
	if copies > 1 {
		fmt.Fprintf(b, " over %d copies", copies)
	}
	b.WriteString("\n")
	per := "per sample"
	if costs.Batch > 0 {
		per = fmt.Sprintf("for a batch of %d", costs.Batch)
	}
	fmt.Fprintf(b, "- activation memory: %s %s at %s (kept for the backward pass)\n", bytesIEC(act), per, costs.Precision)
	switch {
	case costs.Device != "" && costs.DeviceMemory > 0:
		fmt.Fprintf(b, "- device: %s, %s", costs.Device, bytesIEC(costs.DeviceMemory))
		if act > 0 {
			fmt.Fprintf(b, " (%s)", shareOf(act, costs.DeviceMemory))
		}
		b.WriteString("\n")
	case costs.Device != "":
		fmt.Fprintf(b, "- device: %s\n", costs.Device)
	}
	if !planned {
		b.WriteString("\n_From the model's graph; the plan adds the device's choices._")
	}
}

func shape(dims []int64) string {
	if dims == nil {
		return "?"
	}
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// count writes n with thousands separators, and a short form when large:
// "11,689,512 (11.7M)".
func count(n int64) string {
	s := thousands(n)
	if n >= 1e4 {
		s += " (" + short(float64(n), 1000, "", "K", "M", "B", "T") + ")"
	}
	return s
}

// thousands writes n with a comma between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r != '-' && s[i-1] != '-' && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// short writes v with one decimal in the largest unit that keeps it at
// least 1, where each unit is base times the one before. The unit is
// chosen after rounding, so a value just under a unit's step is written
// in the next unit ("1.0M", not "1000.0K").
func short(v, base float64, units ...string) string {
	i := 0
	for i < len(units)-1 && math.Round(v*10)/10 >= base {
		v /= base
		i++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + units[i]
}

// bytesIEC writes a byte count with a binary unit: "6.1 MiB".
func bytesIEC(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	return short(float64(n), 1024, " B", " KiB", " MiB", " GiB", " TiB", " PiB", " EiB")
}

// shareOf says how much of whole part is, in words that agree with the
// numbers beside them: 100% only when part is whole, never 100% or more
// for a part that is smaller nor 100% or less for one that is larger
// (close to it, one decimal, rounded away from 100%), never 0% for a part
// that is not 0; past ten times, a multiple.
func shareOf(part, whole int64) string {
	if whole <= 0 {
		return "of a device of unknown size"
	}
	r := float64(part) / float64(whole)
	// Large counts lose digits as floats; the comparison of the integers
	// decides which side of 100% the share is on.
	if part < whole {
		r = min(r, math.Nextafter(1, 0))
	} else if part > whole {
		r = max(r, math.Nextafter(1, 2))
	}
	pct := func(p float64, decimals int) string { return strconv.FormatFloat(p, 'f', decimals, 64) + "% of it" }
	switch {
	case part <= 0:
		return pct(0, 0)
	case part == whole:
		return pct(100, 0)
	case r < 0.001:
		return "under 0.1% of it"
	case r < 0.1:
		return pct(math.Floor(r*1000)/10, 1)
	case r < 0.9:
		return pct(math.Round(r*100), 0)
	case r < 1:
		return pct(math.Floor(r*1000)/10, 1)
	case r < 1.1:
		return pct(math.Ceil(r*1000)/10, 1) + ", more than it holds"
	case r <= 10:
		return pct(math.Round(r*100), 0) + ", more than it holds"
	}
	return multiple(r) + " what it holds"
}

// multiple writes a ratio above 10 as "14×" or "1,200×", rounded down.
func multiple(r float64) string {
	if r >= 1e15 {
		return "over 10¹⁵×"
	}
	if r < 100 {
		return strconv.FormatFloat(math.Floor(r*10)/10, 'f', 1, 64) + "×"
	}
	return thousands(int64(math.Floor(r))) + "×"
}

// describeWord documents a word from the registry alone, for text the
// analysis has not caught up with.
func describeWord(schema lang.Schema, tok syntax.Token) string {
	switch tok.Kind {
	case syntax.KindSize:
		return sizeWordDoc(tok.Text)
	case syntax.KindIdent:
	default:
		return ""
	}
	word := tok.Text
	if l := schema.Layer(word); l != nil {
		return layerDoc(l)
	}
	if b := schema.Block(word); b != nil {
		return blockDoc(b)
	}
	if f := findFieldSpec(schema.TopFields(), word); f != nil {
		return fieldDoc(f)
	}
	return valueWordDoc(schema, word)
}

func blockDoc(b *lang.BlockSpec) string {
	if b == nil {
		return ""
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "**%s**", b.Name)
	for _, l := range b.Labels {
		n := strings.ToUpper(l.Name)
		if len(l.Enum) > 0 {
			n = strings.Join(l.Enum, "|")
		}
		fmt.Fprintf(&sb, " %s", n)
	}
	fmt.Fprintf(&sb, " `{ … }` — %s", b.Doc)
	return sb.String()
}

func fieldDoc(f *lang.FieldSpec) string {
	if f == nil {
		return ""
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "**%s** — %s", f.Name, f.Doc)
	writeArgs(&sb, f.Args)
	return sb.String()
}

func layerDoc(l *lang.LayerSpec) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "**%s**", l.Name)
	if l.Family {
		sb.WriteString(" (model family)")
	}
	fmt.Fprintf(&sb, " — %s", l.Doc)
	writeArgs(&sb, l.Args)
	return sb.String()
}

func writeArgs(sb *strings.Builder, args []*lang.ArgSpec) {
	if len(args) == 0 {
		return
	}
	sb.WriteString("\n")
	for _, a := range args {
		fmt.Fprintf(sb, "\n- %s", argDoc(a))
	}
}

func argDoc(a *lang.ArgSpec) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "`%s`", a.Name)
	if len(a.Aliases) > 0 {
		fmt.Fprintf(&sb, " (%s)", strings.Join(a.Aliases, ", "))
	}
	fmt.Fprintf(&sb, ": %s", a.Type)
	if a.Positional {
		sb.WriteString(", positional")
	}
	if a.Required {
		sb.WriteString(", required")
	}
	if a.Default != "" {
		fmt.Fprintf(&sb, ", default %s", a.Default)
	}
	if len(a.Kinds) > 0 {
		fmt.Fprintf(&sb, ", %s only", strings.Join(a.Kinds, " and "))
	}
	if a.Doc != "" {
		fmt.Fprintf(&sb, ". %s", a.Doc)
	}
	return sb.String()
}
