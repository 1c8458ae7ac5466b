package spec

import "strings"

// Locations. A path in a program (a source's files, train's
// checkpoint_dir, predict's write) and a run's --checkpoint-dir is a
// local path or a URL. These lists are the URL schemes pipe serves
// (package dataset/remote reads and writes them); the checker refuses
// any other before anything runs, so that s3://bucket/x never becomes a
// local folder named "s3:".

// ReadSchemes are the URL schemes a source's files may have.
var ReadSchemes = []string{"s3", "gs", "https", "http"}

// WriteSchemes are the URL schemes a run's folder may have: its
// checkpoints and report are written there.
var WriteSchemes = []string{"s3", "gs"}

// URLScheme is p's scheme in lower case when p is written as a URL,
// SCHEME://...; "" for a local path. A scheme is a letter, then letters,
// digits, '+', '-' or '.' (RFC 3986); one letter is a Windows drive.
func URLScheme(p string) string {
	i := strings.Index(p, "://")
	if i < 2 {
		return ""
	}
	for j, c := range p[:i] {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case j > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return ""
		}
	}
	return strings.ToLower(p[:i])
}

// SchemeIn reports whether scheme is one of schemes.
func SchemeIn(scheme string, schemes []string) bool {
	for _, s := range schemes {
		if s == scheme {
			return true
		}
	}
	return false
}

// SchemeList is schemes as a message lists them: "s3:// and gs://".
func SchemeList(schemes []string) string {
	var b strings.Builder
	for i, s := range schemes {
		switch {
		case i == 0:
		case i == len(schemes)-1:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(s + "://")
	}
	return b.String()
}

// PathField is a field of a source that names a file or folder.
type PathField struct {
	Field, Path string
}

// PathFields are the source's file and folder fields that are given, in
// the order its kind lists them.
func (s *Source) PathFields() []PathField {
	var out []PathField
	add := func(field, p string) {
		if p != "" {
			out = append(out, PathField{field, p})
		}
	}
	switch {
	case s.IDX != nil:
		add("images", s.IDX.Images)
		add("labels", s.IDX.Labels)
	case s.CSV != nil:
		add("path", s.CSV.Path)
	case s.Images != nil:
		add("path", s.Images.Path)
		add("masks", s.Images.Masks)
	case s.GeoTIFF != nil:
		add("path", s.GeoTIFF.Path)
		add("target", s.GeoTIFF.Target)
	case s.Volume != nil:
		add("path", s.Volume.Path)
		add("target", s.Volume.Target)
	}
	return out
}
