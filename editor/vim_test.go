package editor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pipe/stdlib"
)

// vimSample is highlighted by vim; each check names the syntax group every
// character of a word must get.
const vimSample = `pipeline min
device cuda:0
device a100-80gb
train { optimizer sgd lr -0.5e+2 momentum .5  batch auto(min 8 max 256) }
model m {
  x = conv 32 k3 -> relu
  add x -> dense 10
}
`

var vimChecks = []struct {
	line         int // 1-based
	before, word string
	group        string
}{
	// min is a value (a sweep's goal), never an auto bound outside auto(...).
	{1, "pipeline ", "min", "pipeValue"},
	{2, "", "cuda:0", "pipeValue"},
	{3, "", "a100-80gb", "pipeValue"},
	{4, "", "sgd", "pipeValue"},
	{4, "", "lr", "pipeArg"},
	{4, "lr ", "-0.5e+2", "pipeNumber"},
	{4, "momentum ", ".5", "pipeNumber"},
	{4, "batch ", "auto", "pipeConstant"},
	{4, "auto", "(", "pipeDelimiter"},
	{4, "(", "min", "pipeAutoBound"},
	{4, "min ", "8", "pipeNumber"},
	{4, "8 ", "max", "pipeAutoBound"},
	{4, "max ", "256", "pipeNumber"},
	{4, "256", ")", "pipeDelimiter"},
	{6, "", "x", "pipeLabel"},
	{6, "", "conv", "pipeLayer"},
	{6, "32 ", "k3", "pipeGlued"},
	{6, "k3 ", "->", "pipeOperator"},
	{7, "add ", "x", "pipeName"},
}

// TestVimHighlights runs vim headless over a sample with the generated
// syntax file and checks the group of every character of the words above:
// signed and bare-decimal numbers, cuda:N, auto's bounds. It is skipped
// where vim with syntax support is not installed (apt-get install
// vim-nox).
func TestVimHighlights(t *testing.T) {
	vim, err := exec.LookPath("vim")
	if err != nil {
		t.Skip("vim is not installed")
	}
	files, err := Generate(stdlib.Schema())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	syntaxFile := filepath.Join(dir, "syntax", "pipe.vim")
	if err := os.MkdirAll(filepath.Dir(syntaxFile), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) {
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(syntaxFile, files[filepath.Join("vim", "syntax", "pipe.vim")])
	sample, out := filepath.Join(dir, "sample.pipe"), filepath.Join(dir, "groups.txt")
	write(sample, []byte(vimSample))
	script := filepath.Join(dir, "groups.vim")
	write(script, []byte(`let &runtimepath = '`+dir+`,' . &runtimepath
if !has('syntax')
  call writefile(['no syntax'], '`+out+`')
  qall!
endif
syntax on
edit `+sample+`
set filetype=pipe
let s:out = []
for s:l in range(1, line('$'))
  call add(s:out, join(map(range(1, len(getline(s:l))), 'synIDattr(synID(s:l, v:val, 1), "name")'), "\t"))
endfor
call writefile(s:out, '`+out+`')
qall!
`))
	// The deadline only turns a hung vim into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, vim, "-Nu", "NONE", "-i", "NONE", "-es", "-S", script)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("vim: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(data)) == "no syntax" {
		t.Skip("this vim has no syntax highlighting (vim-tiny); apt-get install vim-nox")
	}
	rows := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	lines := strings.Split(vimSample, "\n")
	for _, c := range vimChecks {
		at := strings.Index(lines[c.line-1], c.before+c.word)
		if at < 0 || c.line > len(rows) {
			t.Fatalf("line %d: %q not in the sample", c.line, c.before+c.word)
		}
		at += len(c.before)
		groups := strings.Split(rows[c.line-1], "\t")
		for i := at; i < at+len(c.word); i++ {
			if i >= len(groups) || groups[i] != c.group {
				got := ""
				if i < len(groups) {
					got = groups[i]
				}
				t.Errorf("line %d: %q: %q is in group %q, want %s", c.line, c.word, c.word[i-at], got, c.group)
				break
			}
		}
	}
}
