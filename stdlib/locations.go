package stdlib

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"pipe/diag"
	"pipe/spec"
)

// CodeURL is the code of a path given as a URL that pipe cannot read or
// write there.
const CodeURL = "unsupported-url"

// sourceURLs are the URL schemes each source kind reads its files from.
// images lists a folder, which object stores can and a web server
// cannot; a volume at a URL is a Zarr array (a multi-page TIFF is read
// from a local file alone). A kind not listed reads local files only.
var sourceURLs = map[string][]string{
	spec.KindIDX:     spec.ReadSchemes,
	spec.KindCSV:     spec.ReadSchemes,
	spec.KindImages:  spec.WriteSchemes, // the stores that list a prefix
	spec.KindGeoTIFF: spec.ReadSchemes,
	spec.KindZarr:    spec.ReadSchemes,
	spec.KindVolume:  spec.ReadSchemes,
}

// SourceReadsURL says what is wrong with reading a source of kind from
// a URL of scheme, "" when nothing.
func SourceReadsURL(kind, scheme string) string {
	schemes, ok := sourceURLs[kind]
	switch {
	case !ok:
		var kinds []string
		for k := range sourceURLs {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		return fmt.Sprintf("a %s source reads local files only; the kinds that read URLs are %s", kind, strings.Join(kinds, ", "))
	case !spec.SchemeIn(scheme, schemes):
		return fmt.Sprintf("a %s source reads local paths and %s URLs, not %s://", kind, spec.SchemeList(schemes), scheme)
	}
	return ""
}

// CheckLocations refuses, before anything is read or trained, the paths
// of prog written as URLs that pipe cannot serve: a source's file at a
// scheme its kind does not read, train's checkpoint_dir at a scheme pipe
// cannot write, and predict's write at any URL (predictions are written
// to local files).
func CheckLocations(prog *spec.Program) diag.Diagnostics {
	if prog == nil {
		return nil
	}
	var ds diag.Diagnostics
	add := func(at diag.Range, summary, detail string, args ...any) {
		r := at
		ds = append(ds, &diag.Diagnostic{Severity: diag.Error, Code: CodeURL, Summary: summary, Detail: fmt.Sprintf(detail, args...), Subject: &r})
	}
	for _, s := range prog.Sources {
		for _, pf := range s.PathFields() {
			sch := spec.URLScheme(pf.Path)
			if sch == "" {
				continue
			}
			if why := SourceReadsURL(s.Kind, sch); why != "" {
				add(s.At.FieldOrBlock(pf.Field), "source "+s.Name+" cannot read "+sch+":// URLs",
					"%s. Copy the files to a local path or to a URL the kind reads.", upper(why))
				continue
			}
			if s.Kind == spec.KindVolume && isTIFF(pf.Path) {
				add(s.At.FieldOrBlock(pf.Field), "source "+s.Name+" cannot read a TIFF stack from a URL",
					"A volume source reads a Zarr array from a URL, and a multi-page TIFF from a local file only. Copy %s to a local path, or convert it to Zarr.", pf.Path)
			}
		}
	}
	if t := prog.Train; t != nil && t.At.Has("checkpoint_dir") {
		if sch := spec.URLScheme(t.CheckpointDir); sch != "" && !spec.SchemeIn(sch, spec.WriteSchemes) {
			add(t.At.FieldOrBlock("checkpoint_dir"), "pipe cannot write checkpoints to "+sch+":// URLs",
				"%s", CheckpointDirProblem(t.CheckpointDir))
		}
	}
	if p := prog.Predict; p != nil && p.At.Has("write") && spec.URLScheme(p.Write) != "" {
		add(p.At.FieldOrBlock("write"), "predictions are written to a local path",
			"predict's write is %s, a URL; pipe writes predictions to local files. Give a local path (copy the file to the store after the run).", p.Write)
	}
	return ds
}

// CheckpointDirProblem says what is wrong with dir as a run's folder
// (--checkpoint-dir or train's checkpoint_dir) when it is a URL pipe
// cannot write, "" when it is a local path or a URL pipe writes.
func CheckpointDirProblem(dir string) string {
	sch := spec.URLScheme(dir)
	if sch == "" || spec.SchemeIn(sch, spec.WriteSchemes) {
		return ""
	}
	return fmt.Sprintf("%s is a %s:// URL; pipe writes a run's folder (checkpoints and report) to a local path or to %s URLs of an object store. Give one of those; without it the run would write a local folder named %q.",
		dir, sch, spec.SchemeList(spec.WriteSchemes), sch+":")
}

func isTIFF(p string) bool {
	l := strings.ToLower(p)
	return slices.ContainsFunc([]string{".tif", ".tiff"}, func(ext string) bool { return strings.HasSuffix(l, ext) })
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
