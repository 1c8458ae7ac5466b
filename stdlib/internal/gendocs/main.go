// Command gendocs writes docs/reference.md from the stdlib registry. It
// links the engines in, which register the names the engine field
// accepts as they start.
//
//	go generate ./stdlib
package main

import (
	"bytes"
	"fmt"
	"os"

	_ "pipe/engine/costs"
	"pipe/stdlib"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gendocs OUT.md")
		os.Exit(2)
	}
	var b bytes.Buffer
	if err := stdlib.WriteReference(&b); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(os.Args[1], b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
