// Package chunkedfile runs error expectations written in the language
// itself, as starlark-go's internal/chunkedfile does. A test file is cut
// into chunks at lines holding only "---"; each chunk is checked on its
// own; a line carrying ### "regexp" (inside a // comment) must receive a
// diagnostic whose summary and detail match the regexp, and no other line
// may receive one. Tests of lang, stdlib and planner share it.
package chunkedfile

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"pipe/diag"
)

// Reporter is the part of testing.T the runner needs.
type Reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

var want = regexp.MustCompile(`###\s*("(?:[^"\\]|\\.)*")`)

// Run checks every chunk of every file matching glob with check, which
// returns the diagnostics of one chunk. A chunk keeps its line numbers:
// the lines before it are blank.
func Run(t Reporter, glob string, check func(name string, src []byte) diag.Diagnostics) {
	t.Helper()
	paths, _ := filepath.Glob(glob)
	if len(paths) == 0 {
		t.Fatalf("no chunked files match %s", glob)
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v", err)
		}
		lines := strings.SplitAfter(string(data), "\n")
		start := 0
		for i := 0; i <= len(lines); i++ {
			if i < len(lines) && strings.TrimSpace(lines[i]) != "---" {
				continue
			}
			chunk := strings.Repeat("\n", start) + strings.Join(lines[start:i], "")
			ds := check(fmt.Sprintf("%s:%d", path, start+1), []byte(chunk))
			compare(t, path, lines[start:i], start, ds)
			start = i + 1
		}
	}
}

func compare(t Reporter, path string, lines []string, offset int, ds diag.Diagnostics) {
	t.Helper()
	expect := map[int]*regexp.Regexp{}
	for j, line := range lines {
		if m := want.FindStringSubmatch(line); m != nil {
			pat, err := strconv.Unquote(m[1])
			if err != nil {
				t.Fatalf("%s:%d: bad expectation %s", path, offset+j+1, m[1])
			}
			expect[offset+j+1] = regexp.MustCompile(pat)
		}
	}
	got := map[int][]string{}
	for _, d := range ds {
		line := 0
		if d.Subject != nil {
			line = d.Subject.Start.Line
		}
		got[line] = append(got[line], d.Summary+": "+d.Detail)
	}
	for line, re := range expect {
		found := false
		for _, msg := range got[line] {
			found = found || re.MatchString(msg)
		}
		if !found {
			t.Errorf("%s:%d: want a diagnostic matching %q, got %q", path, line, re, got[line])
		}
	}
	for line, msgs := range got {
		if expect[line] == nil {
			t.Errorf("%s:%d: unexpected diagnostic(s): %q", path, line, msgs)
		}
	}
}
