package lang

import (
	"sort"
	"strings"

	"github.com/agnivade/levenshtein"
)

// Nearest returns the candidate closest to name by edit distance, or ""
// when none is close enough to be a plausible typo. Every "did you mean" of
// pipe uses it, so they all agree.
func Nearest(name string, candidates []string) string { return nearest(name, candidates) }

// nearest returns the candidate closest to name by edit distance, or ""
// when none is close enough to be a plausible typo (starlark-go's resolver
// suggests names the same way).
func nearest(name string, candidates []string) string {
	best, bestD := "", 0
	limit := 1 + len(name)/3
	for _, c := range candidates {
		if c == name {
			continue
		}
		d := distance(name, c)
		if d <= limit && (best == "" || d < bestD || (d == bestD && c < best)) {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the edit distance between two names, case aside.
func distance(a, b string) int {
	return levenshtein.ComputeDistance(strings.ToLower(a), strings.ToLower(b))
}

// didYouMean formats a hint for name among candidates, or lists a few of
// them when none is close.
func didYouMean(name string, candidates []string) (hint, suggestion string) {
	if s := nearest(name, candidates); s != "" {
		return "Did you mean " + quote(s) + "?", s
	}
	if len(candidates) == 0 {
		return "", ""
	}
	c := append([]string(nil), candidates...)
	sort.Strings(c)
	if len(c) > 12 {
		return "Expected one of " + strings.Join(quoteAll(c[:12]), ", ") + ", ...", ""
	}
	return "Expected one of " + strings.Join(quoteAll(c), ", ") + ".", ""
}

func quote(s string) string { return "'" + s + "'" }

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = quote(s)
	}
	return out
}
