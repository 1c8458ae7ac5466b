package lang

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"pipe/diag"
	"pipe/lang/ast"
)

// byteUnits are the memory units a TBytes or TBandwidth value may carry.
var byteUnits = map[string]float64{
	"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50,
}

// durationUnits are the units of a TDuration, in seconds.
var durationUnits = map[string]float64{"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, "min": 60, "h": 3600}

var flopUnits = map[string]float64{
	"FLOPS": 1, "KFLOPS": 1e3, "MFLOPS": 1e6, "GFLOPS": 1e9, "TFLOPS": 1e12, "PFLOPS": 1e15,
}

func unitNames(m map[string]float64, suffix string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k+suffix)
	}
	return out
}

// flopUnit accepts both TFLOPS and TFLOP/s.
func flopUnit(u string) (float64, bool) {
	if strings.HasSuffix(u, "FLOP/s") {
		u = strings.TrimSuffix(u, "/s") + "S"
	}
	f, ok := flopUnits[u]
	return f, ok
}

// argLabel names an argument for messages: "lr of optimizer in train", or
// just "epochs in train" when the argument is the field's own value.
func argLabel(a *ArgSpec, owner string) string {
	if owner == a.Name || strings.HasPrefix(owner, a.Name+" in ") {
		return owner
	}
	return a.Name + " of " + owner
}

// valueErr reports that a word is not of the expected type.
func (c *checker) valueErr(w ast.Expr, a *ArgSpec, owner string) {
	c.errorf(w.Rng(), "type-mismatch", fmt.Sprintf("%s must be %s", argLabel(a, owner), a.Type),
		"Found %s. %s", describe(w), argHint(a))
}

func argHint(a *ArgSpec) string {
	switch a.Type {
	case TEnum:
		return "Expected one of " + strings.Join(quoteAll(a.Choices()), ", ") + "."
	case TBytes:
		return "Write a number with a unit, such as 24GiB or 512MiB."
	case TBandwidth:
		return "Write a number with a unit per second, such as 2TB/s or 900GB/s."
	case TFlops:
		return "Write a number with a unit, such as 312TFLOPS."
	case TDuration:
		return "Write a number with a unit of time (ns, us, ms, s, min, h), such as 5ms or 30s."
	case TSize:
		return "Write a size such as 64x64, or one integer for a square."
	case TShape:
		return "Write a list of positive integers, such as [3, 224, 224]."
	case TTensor:
		return "Name a tensor labelled earlier in the model (x = ...), or a branch from one in parentheses."
	}
	if a.Auto {
		return "It also accepts auto."
	}
	return ""
}

func describe(w ast.Expr) string {
	switch w := w.(type) {
	case *ast.Ident:
		return "the name " + quote(w.Name)
	case *ast.Number:
		if w.Unit != "" {
			return "the quantity " + w.Text
		}
		return "the number " + w.Text
	case *ast.String:
		return "a string"
	case *ast.Size:
		return "the size " + w.Text
	case *ast.List:
		return "a list"
	case *ast.Paren:
		return "a group in parentheses"
	case *ast.Punct:
		return quote(w.Op)
	}
	return "something else"
}

// parseValue reads one argument value starting at words[i] and returns how
// many words it used (at least 1 when it reported an error, so the caller
// moves on).
func (c *checker) parseValue(a *ArgSpec, words []ast.Expr, i int, owner string) (*Value, int) {
	w := words[i]
	if id, ok := w.(*ast.Ident); ok && id.Name == "auto" {
		if !a.Auto {
			c.errorf(id.Range, "no-auto", fmt.Sprintf("%s cannot be auto", argLabel(a, owner)),
				"Give %s explicitly: %s", a.Name, strings.TrimSuffix(argHint(a), "It also accepts auto."))
			return nil, 1
		}
		v := &Value{Type: a.Type, Auto: true, Range: id.Range}
		if i+1 < len(words) {
			if p, ok := words[i+1].(*ast.Paren); ok && p.Range.Start.Byte == id.Range.End.Byte {
				c.autoBounds(v, p, a, owner)
				v.Range = diag.Join(id.Range, p.Range)
				return v, 2
			}
		}
		return v, 1
	}
	v := c.parseOne(a, a.Type, w, owner)
	if v == nil {
		return nil, 1
	}
	c.checkBounds(v, a, owner)
	return v, 1
}

func (c *checker) autoBounds(v *Value, p *ast.Paren, a *ArgSpec, owner string) {
	ws := p.Words
	for j := 0; j < len(ws); j++ {
		id, ok := ws[j].(*ast.Ident)
		if !ok || (id.Name != "min" && id.Name != "max") {
			c.errorf(ws[j].Rng(), "bad-auto", "auto takes min and max",
				"Write auto, auto(max 256) or auto(min 8 max 256).")
			return
		}
		if j+1 >= len(ws) {
			c.errorf(id.Range, "bad-auto", fmt.Sprintf("auto(%s) needs a number", id.Name),
				"Write auto(%s 256).", id.Name)
			return
		}
		n, ok := ws[j+1].(*ast.Number)
		if !ok || n.Unit != "" || n.Value < 0 {
			c.errorf(ws[j+1].Rng(), "bad-auto", fmt.Sprintf("auto(%s) needs a non-negative number", id.Name),
				"Found %s.", describe(ws[j+1]))
			return
		}
		val := n.Value
		if id.Name == "min" {
			v.AutoMin = &val
		} else {
			v.AutoMax = &val
		}
		j++
	}
	if v.AutoMin != nil && v.AutoMax != nil && *v.AutoMin > *v.AutoMax {
		c.errorf(p.Range, "bad-auto", "auto bounds are reversed",
			"min %g is larger than max %g.", *v.AutoMin, *v.AutoMax)
	}
	bv := &Value{Type: a.Type}
	for _, b := range []*float64{v.AutoMin, v.AutoMax} {
		if b != nil {
			bv.Float, bv.Int, bv.Range = *b, int64(*b), p.Range
			c.checkBounds(bv, a, owner)
		}
	}
}

func (c *checker) parseOne(a *ArgSpec, t Type, w ast.Expr, owner string) *Value {
	r := w.Rng()
	switch t {
	case TInt:
		n, ok := w.(*ast.Number)
		if !ok || n.Unit != "" {
			break
		}
		if !n.IsInt {
			if n.Value == math.Trunc(n.Value) && math.Abs(n.Value) < 1<<53 {
				return &Value{Type: TInt, Int: int64(n.Value), Float: n.Value, Range: r}
			}
			if n.Value == math.Trunc(n.Value) || math.IsInf(n.Value, 0) {
				// A whole number too large to hold (it was read as a float).
				c.errorf(r, "out-of-range", fmt.Sprintf("%s is out of range", argLabel(a, owner)),
					"%s is larger than any count pipe can hold (%d at most); give a smaller number.", n.Text, int64(math.MaxInt64))
				return nil
			}
			c.errorf(r, "type-mismatch", fmt.Sprintf("%s must be a whole number", argLabel(a, owner)),
				"Found %s.", n.Text)
			return nil
		}
		return &Value{Type: TInt, Int: n.Int, Float: float64(n.Int), Range: r}
	case TFloat:
		n, ok := w.(*ast.Number)
		if !ok || n.Unit != "" {
			break
		}
		return &Value{Type: TFloat, Float: n.Value, Int: int64(n.Value), Range: r}
	case TString:
		if s, ok := w.(*ast.String); ok {
			return &Value{Type: TString, Str: s.Value, Range: r}
		}
	case TName:
		switch w := w.(type) {
		case *ast.Ident:
			return &Value{Type: TName, Str: w.Name, Range: r}
		case *ast.String:
			return &Value{Type: TName, Str: w.Value, Range: r}
		}
	case TEnum:
		id, ok := w.(*ast.Ident)
		if !ok {
			break
		}
		for _, e := range a.Choices() {
			if e == id.Name {
				return &Value{Type: TEnum, Str: id.Name, Range: r}
			}
		}
		hint, sug := didYouMean(id.Name, a.Choices())
		c.diags = append(c.diags, &diag.Diagnostic{Severity: diag.Error, Code: "unknown-value",
			Summary: fmt.Sprintf("unknown %s %s", a.Name, quote(id.Name)),
			Detail:  fmt.Sprintf("%s does not accept %s. %s", argLabel(a, owner), quote(id.Name), hint),
			Subject: &r, Suggestion: sug})
		return nil
	case TBool:
		if id, ok := w.(*ast.Ident); ok && (id.Name == "true" || id.Name == "false") {
			return &Value{Type: TBool, Bool: id.Name == "true", Range: r}
		}
	case TSize:
		switch w := w.(type) {
		case *ast.Size:
			for _, d := range w.Dims {
				if d <= 0 {
					c.errorf(r, "bad-value", fmt.Sprintf("%s must be positive", argLabel(a, owner)), "Found %s.", w.Text)
					return nil
				}
			}
			return &Value{Type: TSize, Dims: w.Dims, Range: r}
		case *ast.Number:
			if w.IsInt && w.Unit == "" && w.Int > 0 {
				return &Value{Type: TSize, Dims: []int64{w.Int, w.Int}, Int: w.Int, Range: r}
			}
		}
	case TShape:
		l, ok := w.(*ast.List)
		if !ok {
			if s, ok := w.(*ast.Size); ok {
				c.errorf(r, "type-mismatch", fmt.Sprintf("%s must be a list", argLabel(a, owner)),
					"Write the shape as a list: [%s].", strings.ReplaceAll(s.Text, "x", ", "))
				return nil
			}
			break
		}
		v := &Value{Type: TShape, Range: r}
		for _, e := range l.Elems {
			n, ok := single(e).(*ast.Number)
			if !ok || !n.IsInt || n.Unit != "" || n.Int <= 0 {
				c.errorf(e.Range, "type-mismatch", fmt.Sprintf("%s must hold positive integers", argLabel(a, owner)),
					"Found %s.", describe(single(e)))
				return nil
			}
			v.Dims = append(v.Dims, n.Int)
		}
		if len(v.Dims) == 0 {
			c.errorf(r, "bad-value", fmt.Sprintf("%s is empty", argLabel(a, owner)), "Give at least one extent.")
			return nil
		}
		return v
	case TBytes, TBandwidth:
		n, ok := w.(*ast.Number)
		if !ok {
			break
		}
		unit := n.Unit
		if t == TBandwidth {
			if !strings.HasSuffix(unit, "/s") {
				c.badUnit(n, a, owner, unitNames(byteUnits, "/s"))
				return nil
			}
			unit = strings.TrimSuffix(unit, "/s")
		}
		f, ok := byteUnits[unit]
		if !ok {
			suffix := ""
			if t == TBandwidth {
				suffix = "/s"
			}
			c.badUnit(n, a, owner, unitNames(byteUnits, suffix))
			return nil
		}
		val := n.Value * f
		if val < 0 || val > math.MaxInt64/2 {
			c.errorf(r, "bad-value", fmt.Sprintf("%s is out of range", argLabel(a, owner)), "Found %s.", n.Text)
			return nil
		}
		return &Value{Type: t, Int: int64(val), Float: val, Range: r}
	case TFlops:
		n, ok := w.(*ast.Number)
		if !ok {
			break
		}
		f, ok := flopUnit(n.Unit)
		if !ok {
			c.badUnit(n, a, owner, unitNames(flopUnits, ""))
			return nil
		}
		return &Value{Type: TFlops, Float: n.Value * f, Int: int64(n.Value * f), Range: r}
	case TDuration:
		n, ok := w.(*ast.Number)
		if !ok {
			break
		}
		f, ok := durationUnits[n.Unit]
		if !ok {
			c.badUnit(n, a, owner, unitNames(durationUnits, ""))
			return nil
		}
		sec := n.Value * f
		if sec < 0 || sec > 1e9 {
			c.errorf(r, "bad-value", fmt.Sprintf("%s is out of range", argLabel(a, owner)), "Found %s.", n.Text)
			return nil
		}
		return &Value{Type: TDuration, Float: sec, Int: int64(math.Round(sec * 1e9)), Range: r}
	case TList:
		l, ok := w.(*ast.List)
		if !ok {
			// A single element may be written without brackets.
			if e := c.parseOne(a, a.Elem, w, owner); e != nil {
				return &Value{Type: TList, List: []*Value{e}, Range: r}
			}
			return nil
		}
		v := &Value{Type: TList, Range: r}
		for _, e := range l.Elems {
			ew := single(e)
			if ew == nil {
				c.errorf(e.Range, "type-mismatch", fmt.Sprintf("each element of %s must be one word", a.Name),
					"Separate elements with commas: [a, b].")
				return nil
			}
			ev := c.parseOne(a, a.Elem, ew, owner)
			if ev == nil {
				return nil
			}
			c.checkBounds(ev, a, owner)
			v.List = append(v.List, ev)
		}
		return v
	case TWord:
		switch w := w.(type) {
		case *ast.Ident:
			return &Value{Type: TWord, Str: w.Name, Range: r}
		case *ast.Number:
			return &Value{Type: TWord, Str: w.Text, Float: w.Value, Int: w.Int, Range: r}
		case *ast.String:
			return &Value{Type: TWord, Str: strconv.Quote(w.Value), Range: r}
		case *ast.Size:
			return &Value{Type: TWord, Str: w.Text, Range: r}
		}
	case TTensor:
		switch w := w.(type) {
		case *ast.Ident:
			return &Value{Type: TTensor, Tensor: &Chain{From: w.Name, FromRange: w.Range, Range: w.Range}, Range: r}
		case *ast.Paren:
			ch := c.chain(w.Words, w.Range, fromBranch)
			if ch == nil {
				return nil
			}
			if ch.From == "" {
				c.errorf(w.Range, "type-mismatch", "a branch must start from a named tensor",
					"Write the tensor's label first: add(x -> conv 64 k1).")
				return nil
			}
			return &Value{Type: TTensor, Tensor: ch, Range: r}
		}
	}
	c.valueErr(w, a, owner)
	return nil
}

func (c *checker) badUnit(n *ast.Number, a *ArgSpec, owner string, units []string) {
	r := n.Range
	if n.Unit == "" {
		c.errorf(r, "missing-unit", fmt.Sprintf("%s needs a unit", argLabel(a, owner)),
			"%s is a bare number. %s", n.Text, argHint(a))
		return
	}
	hint, sug := didYouMean(n.Unit, units)
	d := &diag.Diagnostic{Severity: diag.Error, Code: "bad-unit",
		Summary: fmt.Sprintf("unknown unit %s", quote(n.Unit)),
		Detail:  fmt.Sprintf("%s is %s. %s", argLabel(a, owner), argHint(a), hint), Subject: &r}
	if sug != "" {
		d.Suggestion = strings.TrimSuffix(n.Text, n.Unit) + sug
	}
	c.diags = append(c.diags, d)
}

func single(s *ast.Seq) ast.Expr {
	if s == nil || len(s.Words) != 1 {
		return nil
	}
	return s.Words[0]
}

// checkBounds reports a number outside the argument's bounds.
func (c *checker) checkBounds(v *Value, a *ArgSpec, owner string) {
	if v == nil || (a.Min == nil && a.Max == nil) {
		return
	}
	var x float64
	switch v.Type {
	case TInt, TFloat, TBytes, TBandwidth, TFlops, TDuration:
		x = v.Float
		if v.Type == TInt {
			x = float64(v.Int)
		}
	default:
		return
	}
	low := a.Min != nil && (x < *a.Min || (a.MinOpen && x == *a.Min))
	high := a.Max != nil && (x > *a.Max || (a.MaxOpen && x == *a.Max))
	if low || high {
		c.errorf(v.Range, "out-of-range", fmt.Sprintf("%s is out of range", argLabel(a, owner)),
			"%s must be %s; found %s.", a.Name, describeBounds(a), strconv.FormatFloat(x, 'g', -1, 64))
	}
}

func describeBounds(a *ArgSpec) string {
	lo, hi := "", ""
	if a.Min != nil {
		lo = "[" + strconv.FormatFloat(*a.Min, 'g', -1, 64)
		if a.MinOpen {
			lo = "(" + lo[1:]
		}
	}
	if a.Max != nil {
		hi = strconv.FormatFloat(*a.Max, 'g', -1, 64) + "]"
		if a.MaxOpen {
			hi = hi[:len(hi)-1] + ")"
		}
	}
	switch {
	case lo != "" && hi != "":
		return "in " + lo + ", " + hi
	case lo != "":
		op := ">= "
		if a.MinOpen {
			op = "> "
		}
		return op + strconv.FormatFloat(*a.Min, 'g', -1, 64)
	default:
		op := "<= "
		if a.MaxOpen {
			op = "< "
		}
		return op + strconv.FormatFloat(*a.Max, 'g', -1, 64)
	}
}

var gluedArg = regexp.MustCompile(`^([A-Za-z_]+?)(\d+)$`)
