// Command gen writes pipe's generated editor files (see package editor).
// It runs from the editor folder: go generate ./editor. It links the
// engines in, which register the names the engine field accepts.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"pipe/editor"
	_ "pipe/engine/costs"
	"pipe/stdlib"
)

func main() {
	files, err := editor.Generate(stdlib.Schema())
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(name, files[name], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		fmt.Println("gen: wrote editor/" + filepath.ToSlash(name))
	}
}
