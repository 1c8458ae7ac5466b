package main

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// version is the release the binary was built as, set by the Makefile's
// build target: go build -ldflags "-X main.version=$(git describe --tags
// --always --dirty)". Empty in a plain go build, which falls back on what
// Go stamps into the build info.
var version string

// commit is the commit the binary was built from, set by the Makefile
// like version (git rev-parse HEAD); empty, Go's vcs.revision stands.
var commit string

// buildStamp is what the binary knows of where it was built from.
type buildStamp struct {
	version  string // a release, a pseudo-version, or "devel"
	commit   string // vcs.revision, "" when unknown
	time     string // vcs.time's date, "" when unknown
	modified bool   // vcs.modified: built from a checkout with changes
	goVer    string
}

// readStamp reads the stamp: the -X version and commit first, then the
// main module's version (go install, or Go's own VCS stamp) and the vcs.*
// settings Go records when building inside a git checkout.
func readStamp(ldVersion, ldCommit string, bi *debug.BuildInfo) buildStamp {
	s := buildStamp{version: ldVersion}
	if bi != nil {
		s.goVer = bi.GoVersion
		if s.version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			s.version = bi.Main.Version
		}
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				s.commit = kv.Value
			case "vcs.time":
				s.time, _, _ = strings.Cut(kv.Value, "T")
			case "vcs.modified":
				s.modified = kv.Value == "true"
			}
		}
	}
	if ldCommit != "" {
		s.commit = ldCommit
	}
	if s.version == "" {
		s.version = "devel"
	}
	return s
}

// String is the version line: "v0.3.1-4-gabcdef (commit abcdef1234ab,
// 2026-11-27, modified) go1.26.8", or "devel (commit unknown) go1.26.8"
// when nothing was stamped.
func (s buildStamp) String() string {
	var paren []string
	if s.commit == "" {
		paren = append(paren, "commit unknown")
	} else {
		paren = append(paren, "commit "+s.commit[:min(len(s.commit), 12)])
	}
	if s.time != "" {
		paren = append(paren, s.time)
	}
	if s.modified {
		paren = append(paren, "modified")
	}
	line := fmt.Sprintf("%s (%s)", s.version, strings.Join(paren, ", "))
	if s.goVer != "" {
		line += " " + s.goVer
	}
	return line
}

// stamp is this binary's build stamp.
func stamp() buildStamp {
	bi, _ := debug.ReadBuildInfo()
	return readStamp(version, commit, bi)
}

// pipeVersion is the binary's version alone, for an ONNX file's
// producer_version and the language server's initialize reply.
func pipeVersion() string { return stamp().version }

func runVersion(a *app, args []string) int {
	fs := a.newFlags("version")
	files, err := a.parseFlags(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(files) > 0 {
		fmt.Fprintf(a.env.Stderr, "pipe version takes no arguments; got %s\nusage: pipe version\n", strings.Join(files, ", "))
		return exitErrors
	}
	fmt.Fprintf(a.env.Stdout, "pipe %s\n", stamp())
	return exitOK
}
