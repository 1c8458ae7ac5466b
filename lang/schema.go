package lang

import (
	"pipe/diag"
)

// Schema is what the checker needs to know about the standard library:
// every block, field, layer and argument, and a way to check a model's
// shapes. Package stdlib implements it; lang never imports stdlib, so the
// language stays free of the runtime (starlark-go's resolver takes lookup
// functions the same way).
type Schema interface {
	// TopFields are the fields allowed outside any block ("pipeline",
	// "device", "precision", "seed").
	TopFields() []*FieldSpec
	// Block returns the spec of a block keyword ("source", "model",
	// "train", ...), or nil.
	Block(name string) *BlockSpec
	// BlockNames lists the block keywords, for "did you mean".
	BlockNames() []string
	// Layer returns the spec of a layer or model family, or nil.
	Layer(name string) *LayerSpec
	// LayerNames lists every layer and family name.
	LayerNames() []string
	// DeviceNames lists the built-in device profiles.
	DeviceNames() []string
	// CheckModel infers the shapes through a checked model and reports
	// mismatches at the layer that causes them.
	CheckModel(m *Model) diag.Diagnostics
}

// Type is the type of an argument's value.
type Type int

// Argument types.
const (
	TInt       Type = iota + 1 // 32, -1
	TFloat                     // 1e-3, 0.25, 7
	TString                    // "data/x.tif"
	TEnum                      // one identifier out of ArgSpec.Enum
	TName                      // any identifier: a reference to a source, model or device
	TBool                      // true | false; a bare flag means true
	TSize                      // 64x64 (or a single integer for a square)
	TShape                     // [6, 64, 64]
	TBytes                     // 24GiB
	TBandwidth                 // 2TB/s
	TFlops                     // 312TFLOPS
	TList                      // [a, b]: a list of ArgSpec.Elem
	TTensor                    // a named tensor (x) or a branch from one: (x -> conv 64 k1)
	TDuration                  // 5ms, 30s
	TWord                      // one word of any kind: 64, 1e-3, adam, "text" (a sweep's choices)
)

var typeNames = map[Type]string{
	TInt: "an integer", TFloat: "a number", TString: "a string", TEnum: "a name",
	TName: "a name", TBool: "true or false", TSize: "a size such as 64x64",
	TShape: "a shape such as [3, 224, 224]", TBytes: "a memory size such as 24GiB",
	TBandwidth: "a bandwidth such as 2TB/s", TFlops: "a rate such as 312TFLOPS",
	TList: "a list", TDuration: "a duration such as 5ms", TTensor: "a named tensor or a branch such as (x -> conv 64 k1)",
	TWord: "a number, a name or a string",
}

// String describes the type for diagnostics.
func (t Type) String() string { return typeNames[t] }

// ArgSpec describes one argument of a field or a layer.
type ArgSpec struct {
	Name string
	Type Type
	// Elem is the element type of a TList.
	Elem Type
	// Enum lists the identifiers a TEnum (or a TList of TEnum) accepts;
	// EnumFrom, when set, gives them instead each time they are read, for
	// a list that is filled after the schema is built (the engines
	// register their names as they start). Read them with Choices.
	Enum     []string
	EnumFrom func() []string
	// Positional arguments may be written without their name, in the order
	// they are declared, before any named argument.
	Positional bool
	// Glued integer arguments may be written joined to their name: k3,
	// pad1, s2.
	Glued bool
	// Aliases are other names the argument answers to.
	Aliases []string
	// Required arguments must be given.
	Required bool
	// Auto allows "auto" and "auto(min A max B)"; the planner decides.
	Auto bool
	// Min and Max bound a number when set; MinOpen and MaxOpen make the
	// bound exclusive.
	Min, Max         *float64
	MinOpen, MaxOpen bool
	// Default is the value's text when the argument is left out, for
	// documentation and completion; it is not applied by the checker.
	Default string
	Doc     string
	// Kinds, when set, limits the argument to these values of the kind
	// of its field or layer (KindArg): optimizer's momentum is sgd's
	// alone. Empty means every kind takes it.
	Kinds []string
}

// Choices returns the identifiers a TEnum (or a TList of TEnum)
// accepts: EnumFrom's when set, else Enum.
func (a *ArgSpec) Choices() []string {
	if a.EnumFrom != nil {
		return a.EnumFrom()
	}
	return a.Enum
}

// TakenBy reports whether the argument applies to the given kind: always
// when it has no Kinds or the kind is not known.
func (a *ArgSpec) TakenBy(kind string) bool {
	return len(a.Kinds) == 0 || kind == "" || contains(a.Kinds, kind)
}

// KindArg returns the argument that names the kind of a field or layer,
// the one other arguments' Kinds refer to: its first positional argument
// when that is an enumeration and some argument has Kinds; nil otherwise.
func KindArg(args []*ArgSpec) *ArgSpec {
	var first *ArgSpec
	limited := false
	for _, a := range args {
		if first == nil && a.Positional {
			first = a
		}
		limited = limited || len(a.Kinds) > 0
	}
	if first == nil || first.Type != TEnum || !limited {
		return nil
	}
	return first
}

// ArgsOfKind returns the arguments a field or layer of the given kind
// takes, in order: every argument whose Kinds allow it.
func ArgsOfKind(args []*ArgSpec, kind string) []*ArgSpec {
	out := make([]*ArgSpec, 0, len(args))
	for _, a := range args {
		if a.TakenBy(kind) {
			out = append(out, a)
		}
	}
	return out
}

// FieldSpec describes a field: a name followed by its arguments.
type FieldSpec struct {
	Name     string
	Args     []*ArgSpec
	Required bool
	// Repeatable fields may be written more than once in a block, each
	// a field of its own (a sweep's uniform and choice lines).
	Repeatable bool
	Doc        string
}

// Arg finds an argument by name or alias.
func (f *FieldSpec) Arg(name string) *ArgSpec { return FindArg(f.Args, name) }

// BodyKind says what the statements of a block are.
type BodyKind int

const (
	// BodyFields: every statement is a field.
	BodyFields BodyKind = iota
	// BodyModel: statements are fields, layer chains, or family arguments.
	BodyModel
)

// BlockSpec describes a block keyword.
type BlockSpec struct {
	Name string
	Doc  string
	// Labels are the words between the keyword and the brace, such as the
	// name and the kind of a source.
	Labels []*LabelSpec
	// Fields allowed in every block of this keyword.
	Fields []*FieldSpec
	// Variants add fields by the value of the label at VariantLabel (the
	// kind of a source: idx, csv, geotiff, ...).
	Variants     map[string][]*FieldSpec
	VariantLabel int
	// Once blocks may appear at most once in a file.
	Once bool
	Body BodyKind
}

// FieldsFor returns the fields allowed in a block with the given variant.
func (b *BlockSpec) FieldsFor(variant string) []*FieldSpec {
	out := append([]*FieldSpec(nil), b.Fields...)
	return append(out, b.Variants[variant]...)
}

// LabelSpec describes a label of a block.
type LabelSpec struct {
	Name string
	// Enum restricts the label to these identifiers; empty means any name,
	// which then declares a name (it must be unique among blocks of this
	// keyword).
	Enum     []string
	Optional bool
	Doc      string
}

// LayerSpec describes a layer or a model family as the language sees it:
// its name and arguments. What it computes and costs lives in stdlib.
type LayerSpec struct {
	Name string
	Args []*ArgSpec
	// Family layers expand into a whole network (resnet50, unet, mlp).
	Family bool
	Doc    string
}

// Arg finds an argument by name or alias.
func (l *LayerSpec) Arg(name string) *ArgSpec { return FindArg(l.Args, name) }

// FindArg finds the argument of args with the given name or alias, or nil.
func FindArg(args []*ArgSpec, name string) *ArgSpec {
	for _, a := range args {
		if a.Name == name {
			return a
		}
		for _, al := range a.Aliases {
			if al == name {
				return a
			}
		}
	}
	return nil
}

// F returns a pointer to v, for ArgSpec bounds.
func F(v float64) *float64 { return &v }
