// Command torchspec writes the PyTorch description of pipe models: for
// each .pipe file, NAME.json (the graph's nodes, the loss, the optimizer,
// the batch) and NAME.bin (pipe's initial parameters, a batch, and pipe's
// output on it) in the output folder, with the torch engine's module
// the pipe_torch package beside them. bench/torch_step.py reads them:
//
//	go run ./bench/cmd/torchspec -o /tmp/spec bench/models/mlp.pipe
//	/usr/bin/python3 bench/torch_step.py /tmp/spec/mlp.json
package main

import (
	"flag"
	"fmt"
	"os"

	"pipe/bench/torchspec"
	"pipe/engine/torch"
)

func main() {
	out := flag.String("o", ".", "write NAME.json and NAME.bin into this folder")
	threads := flag.Int("threads", 0, "compute threads recorded in the spec (0: GOMAXPROCS)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: torchspec [-o DIR] [-threads N] FILE.pipe...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "torchspec:", err)
		os.Exit(1)
	}
	// torch_step.py builds the network with the torch engine's module.
	if _, err := torch.WriteScript(*out); err != nil {
		fmt.Fprintln(os.Stderr, "torchspec:", err)
		os.Exit(1)
	}
	for _, f := range flag.Args() {
		m, err := torchspec.Load(f, *threads)
		if err != nil {
			fmt.Fprintln(os.Stderr, "torchspec:", err)
			os.Exit(1)
		}
		path, _, err := m.Write(*out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "torchspec:", err)
			os.Exit(1)
		}
		fmt.Println(path)
	}
}
