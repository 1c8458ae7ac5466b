// Command pipe checks, formats, plans and runs .pipe pipelines.
//
//	pipe check [--json] FILE...        parse and validate
//	pipe fmt [-w] [--check] FILE...    canonical formatting
//	pipe plan [flags] FILE             memory and decisions for a device
//	pipe run [flags] FILE              train, evaluate and predict
//	pipe export FILE --onnx OUT.onnx   the trained model as ONNX
//	pipe serve [flags] FILE            the trained model over HTTP
//	pipe devices                       the devices pipe can plan for
//	pipe lsp                           the language server over stdio
//	pipe version
//
// A FILE of "-" reads standard input. Exit codes: 0 ok, 1 errors found,
// 2 "fmt --check" found a file to change, 3 the plan does not fit,
// 130 a run was interrupted.
package main

import (
	"os"
)

func main() {
	os.Exit(Main(os.Args[1:], &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}))
}
