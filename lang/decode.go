package lang

import (
	"fmt"
	"reflect"
	"strings"

	"pipe/diag"
)

// Decode fills the struct v points to from the checked block b, in the
// manner of HCL's gohcl.DecodeBody. A struct field tagged pipe:"name"
// takes the main argument of field name, pipe:"name.arg" its argument
// arg. A field of struct-pointer type tagged pipe:"name" is allocated
// when the block gives field name, and its own tags name that field's
// arguments. What the block does not give, and an auto value (left for
// the consumer to decide), leaves the Go field as it was: nil, or the
// default the caller set; a field whose pointer is an AutoSetting
// (spec.Auto) records auto, or the value, and where it was written. A
// value that does not fit its Go field (a schema and its spec out of
// step) is an error diagnostic at the value.
func Decode(b *Block, v any) diag.Diagnostics {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return diag.Diagnostics{diag.Errorf(b.Range, "decode", "cannot decode a block", "Decode needs a pointer to a struct, not %T.", v)}
	}
	var ds diag.Diagnostics
	decodeStruct(b, "", rv.Elem(), &ds)
	return ds
}

// AutoSetting is a Go field that takes a setting written as a value or
// as auto (spec.Auto, through a pointer to it): SetWritten records where
// and whether as auto, with auto's bounds, and returns the pointer the
// value is stored in. lang names the interface so as not to import spec.
type AutoSetting interface {
	SetWritten(at diag.Range, auto bool, min, max *float64) any
}

// autoSetting is fv, whose type isAutoSetting, as an AutoSetting,
// allocating it when fv is a nil pointer.
func autoSetting(fv reflect.Value) AutoSetting {
	if fv.Kind() != reflect.Pointer {
		return fv.Addr().Interface().(AutoSetting)
	}
	if fv.IsNil() {
		fv.Set(reflect.New(fv.Type().Elem()))
	}
	return fv.Interface().(AutoSetting)
}

// isAutoSetting reports whether a field of type t decodes as an
// AutoSetting.
func isAutoSetting(t reflect.Type) bool {
	if t.Kind() != reflect.Pointer {
		t = reflect.PointerTo(t)
	}
	_, ok := reflect.New(t.Elem()).Interface().(AutoSetting)
	return ok
}

// decodeStruct fills sv's tagged fields from b: from the fields the tags
// name, or, when in is set, from the arguments of field in.
func decodeStruct(b *Block, in string, sv reflect.Value, ds *diag.Diagnostics) {
	st := sv.Type()
	for i := range st.NumField() {
		sf := st.Field(i)
		tag, ok := sf.Tag.Lookup("pipe")
		if !ok || !sf.IsExported() {
			continue
		}
		name, arg := tag, ""
		if in != "" {
			name, arg = in, tag
		} else if n, a, ok := strings.Cut(tag, "."); ok {
			name, arg = n, a
		}
		f := b.Field(name)
		if f == nil {
			continue
		}
		fv := sv.Field(i)
		auto := isAutoSetting(sf.Type)
		if !auto && in == "" && arg == "" && sf.Type.Kind() == reflect.Pointer && sf.Type.Elem().Kind() == reflect.Struct {
			p := reflect.New(sf.Type.Elem())
			decodeStruct(b, name, p.Elem(), ds)
			fv.Set(p)
			continue
		}
		val := f.First()
		if arg != "" {
			val = f.Args[arg]
		}
		if val == nil {
			continue
		}
		if auto {
			slot := autoSetting(fv).SetWritten(val.Range, val.Auto, val.AutoMin, val.AutoMax)
			fv = reflect.ValueOf(slot).Elem()
		}
		if val.Auto {
			continue
		}
		if err := setValue(fv, val); err != nil {
			*ds = append(*ds, diag.Errorf(val.Range, "decode", fmt.Sprintf("cannot decode %s", tag),
				"%v; the schema and the spec of %s %s disagree.", err, b.Kind, b.Name()))
		}
	}
}

// setValue stores val in fv, allocating pointers.
func setValue(fv reflect.Value, val *Value) error {
	t := fv.Type()
	switch t.Kind() {
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		if err := setValue(p.Elem(), val); err != nil {
			return err
		}
		fv.Set(p)
		return nil
	case reflect.String:
		if val.Type != TString && val.Type != TEnum && val.Type != TName {
			break
		}
		fv.SetString(val.Str)
		return nil
	case reflect.Bool:
		if val.Type != TBool {
			break
		}
		fv.SetBool(val.Bool)
		return nil
	case reflect.Int, reflect.Int64:
		if val.Type != TInt && val.Type != TBytes {
			break
		}
		fv.SetInt(val.Int)
		return nil
	case reflect.Float64:
		switch val.Type {
		case TFloat, TInt, TBandwidth, TFlops, TDuration:
			fv.SetFloat(val.Float)
			return nil
		}
	case reflect.Slice:
		if val.Type != TList {
			if t.Elem().Kind() != reflect.Int64 || (val.Type != TSize && val.Type != TShape) {
				break
			}
			fv.Set(reflect.ValueOf(append([]int64(nil), val.Dims...)))
			return nil
		}
		s := reflect.MakeSlice(t, len(val.List), len(val.List))
		for i, e := range val.List {
			if err := setValue(s.Index(i), e); err != nil {
				return err
			}
		}
		fv.Set(s)
		return nil
	}
	return fmt.Errorf("%s does not fit a Go %s", val.Type, t)
}
