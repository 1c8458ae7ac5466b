package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"pipe/lang/format"
)

// lspWait bounds every wait; it turns a hang into a failure and times
// nothing.
const lspWait = 30 * time.Second

// TestLSPHelperProcess is not a test: the tests below run the test binary
// again with PIPE_LSP_HELPER=1, and this function then is `pipe lsp`, a
// real process on real pipes.
func TestLSPHelperProcess(t *testing.T) {
	if os.Getenv("PIPE_LSP_HELPER") != "1" {
		t.Skip("runs only as the language server process of the TestLSP tests")
	}
	os.Exit(Main([]string{"--log-level", "debug", "lsp", "--debounce", "10ms"},
		&Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}))
}

// lspProcess is `pipe lsp` in a child process, and a client speaking to it
// through go.lsp.dev/jsonrpc2 over the child's standard input and output.
type lspProcess struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *lockedBuffer
	conn   jsonrpc2.Conn
	diags  chan protocol.PublishDiagnosticsParams
}

// lockedBuffer is a bytes.Buffer the child's stderr copier writes while
// the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type pipeRWC struct {
	io.ReadCloser
	io.WriteCloser
}

// Close closes the reading side only: the tests close the server's input
// themselves, when they mean to.
func (p pipeRWC) Close() error { return p.ReadCloser.Close() }

func startLSP(t *testing.T) *lspProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLSPHelperProcess$")
	cmd.Env = append(os.Environ(), "PIPE_LSP_HELPER=1")
	p := &lspProcess{t: t, cmd: cmd, stderr: &lockedBuffer{}, diags: make(chan protocol.PublishDiagnosticsParams, 100)}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if p.stdout, err = cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", p.stderr)
		}
	})
	p.conn = jsonrpc2.NewConn(jsonrpc2.NewStream(pipeRWC{p.stdout, p.stdin}))
	p.conn.Go(context.Background(), func(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) error {
		if req.Method() == protocol.MethodTextDocumentPublishDiagnostics {
			var d protocol.PublishDiagnosticsParams
			if err := json.Unmarshal(req.Params(), &d); err == nil {
				p.diags <- d
			}
		}
		return reply(ctx, nil, nil)
	})
	return p
}

func (p *lspProcess) call(method string, params, result any) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), lspWait)
	defer cancel()
	if _, err := p.conn.Call(ctx, method, params, result); err != nil {
		p.t.Fatalf("%s: %v", method, err)
	}
}

func (p *lspProcess) notify(method string, params any) {
	p.t.Helper()
	if err := p.conn.Notify(context.Background(), method, params); err != nil {
		p.t.Fatalf("%s: %v", method, err)
	}
}

func (p *lspProcess) diagnostics(uri protocol.DocumentURI, version int32) []protocol.Diagnostic {
	p.t.Helper()
	timeout := time.After(lspWait)
	for {
		select {
		case d := <-p.diags:
			if d.URI == uri && d.Version == uint32(version) {
				return d.Diagnostics
			}
		case <-timeout:
			p.t.Fatalf("no diagnostics for version %d", version)
		}
	}
}

// exitCode waits for the process and returns its exit code; a process
// killed by a signal fails the test.
func (p *lspProcess) exitCode() int {
	p.t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(lspWait):
		p.t.Fatal("pipe lsp did not exit")
	}
	st := p.cmd.ProcessState
	if !st.Exited() {
		p.t.Fatalf("pipe lsp did not exit by itself: %v", st)
	}
	return st.ExitCode()
}

// The mistake ("rleu") follows a comment with non-ASCII text on its own
// line, so its UTF-16 column (23) differs from its byte column (26).
const lspDoc = "// Modèle résumé\nmodel m {\n  input   [4]\n  dense 8 -> relu\n  dense 2 /* é😀 */ -> rleu\n}\n"

func TestLSPSession(t *testing.T) {
	p := startLSP(t)
	var init protocol.InitializeResult
	p.call(protocol.MethodInitialize, &protocol.InitializeParams{ProcessID: int32(os.Getpid())}, &init)
	if init.ServerInfo == nil || init.ServerInfo.Name != "pipe" || init.Capabilities.HoverProvider != true {
		t.Fatalf("initialize: %+v", init)
	}
	p.notify(protocol.MethodInitialized, &protocol.InitializedParams{})

	uri := protocol.DocumentURI("file:///work/m.pipe")
	p.notify(protocol.MethodTextDocumentDidOpen, &protocol.DidOpenTextDocumentParams{TextDocument: protocol.TextDocumentItem{
		URI: uri, LanguageID: "pipe", Version: 1, Text: lspDoc}})
	ds := p.diagnostics(uri, 1)
	if len(ds) != 1 {
		t.Fatalf("want one diagnostic, got %+v", ds)
	}
	want := protocol.Range{Start: protocol.Position{Line: 4, Character: 23}, End: protocol.Position{Line: 4, Character: 27}}
	if ds[0].Range != want || !strings.Contains(ds[0].Message, "unknown layer") || ds[0].Severity != protocol.DiagnosticSeverityError {
		t.Errorf("diagnostic %+v, want an unknown layer error at %v", ds[0], want)
	}

	var hover protocol.Hover
	p.call(protocol.MethodTextDocumentHover, &protocol.HoverParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{
		TextDocument: protocol.TextDocumentIdentifier{URI: uri}, Position: protocol.Position{Line: 3, Character: 4}}}, &hover)
	for _, w := range []string{"**dense**", "output: `[8]`", "parameters: 40", "activation memory"} {
		if !strings.Contains(hover.Contents.Value, w) {
			t.Errorf("hover lacks %q: %s", w, hover.Contents.Value)
		}
	}
	if hover.Range == nil || hover.Range.Start != (protocol.Position{Line: 3, Character: 2}) {
		t.Errorf("hover range %+v", hover.Range)
	}

	var edits []protocol.TextEdit
	p.call(protocol.MethodTextDocumentFormatting, &protocol.DocumentFormattingParams{
		TextDocument: protocol.TextDocumentIdentifier{URI: uri}}, &edits)
	wantText, err := format.Source([]byte(lspDoc))
	if err != nil {
		t.Fatal(err)
	}
	if got := applyEdits(t, lspDoc, edits); got != string(wantText) {
		t.Errorf("formatted:\n%s\nwant:\n%s", got, wantText)
	}

	p.call(protocol.MethodShutdown, nil, nil)
	p.notify(protocol.MethodExit, nil)
	if code := p.exitCode(); code != exitOK {
		t.Errorf("exit code %d after shutdown and exit, want %d", code, exitOK)
	}
}

// applyEdits applies edits in the test's own simple way: one line-and-
// column edit, ASCII text before it.
func applyEdits(t *testing.T, text string, edits []protocol.TextEdit) string {
	t.Helper()
	offset := func(pos protocol.Position) int {
		lines := strings.SplitAfter(text, "\n")
		off := 0
		for i := 0; i < int(pos.Line); i++ {
			off += len(lines[i])
		}
		return off + int(pos.Character)
	}
	for i := len(edits) - 1; i >= 0; i-- {
		e := edits[i]
		text = text[:offset(e.Range.Start)] + e.NewText + text[offset(e.Range.End):]
	}
	return text
}

// TestLSPClientVanishes: the client stops reading, then stops writing,
// without shutdown. The server must neither hang nor die by SIGPIPE; it
// exits with 1.
func TestLSPClientVanishes(t *testing.T) {
	p := startLSP(t)
	var init protocol.InitializeResult
	p.call(protocol.MethodInitialize, &protocol.InitializeParams{}, &init)
	uri := protocol.DocumentURI("file:///work/m.pipe")
	p.notify(protocol.MethodTextDocumentDidOpen, &protocol.DidOpenTextDocumentParams{TextDocument: protocol.TextDocumentItem{
		URI: uri, LanguageID: "pipe", Version: 1, Text: lspDoc}})
	p.diagnostics(uri, 1)
	_ = p.stdout.Close() // no one reads the server's output any more
	// The client's connection died with its input; write the change by hand.
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": protocol.MethodTextDocumentDidChange, "params": map[string]any{
		"textDocument":   map[string]any{"uri": uri, "version": 2},
		"contentChanges": []map[string]any{{"text": lspDoc + "\n"}},
	}})
	if _, err := fmt.Fprintf(p.stdin, "Content-Length: %d\r\n\r\n%s", len(body), body); err != nil {
		t.Fatal(err)
	}
	// Publishing the new diagnostics fails with EPIPE; the server logs it
	// and lives on.
	deadline := time.Now().Add(lspWait)
	for !strings.Contains(p.stderr.String(), "broken pipe") {
		if time.Now().After(deadline) {
			t.Fatal("the server never wrote into the closed pipe")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = p.stdin.Close()
	if code := p.exitCode(); code != exitErrors {
		t.Errorf("exit code %d when the client vanished, want %d", code, exitErrors)
	}
}
