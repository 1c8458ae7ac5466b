package lsp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"pipe/diag"
	"pipe/lang"
)

// wait bounds every wait in these tests; it only turns a hang into a
// failure, nothing is timed.
const wait = 20 * time.Second

// testClient is an LSP client connected to an in-process server over a
// synchronous in-memory pipe.
type testClient struct {
	t      *testing.T
	conn   jsonrpc2.Conn
	diags  chan protocol.PublishDiagnosticsParams
	shown  chan protocol.ShowMessageParams
	served chan error
}

func startServer(t *testing.T, opts ...Option) *testClient {
	t.Helper()
	cside, sside := net.Pipe()
	c := &testClient{t: t, diags: make(chan protocol.PublishDiagnosticsParams, 100),
		shown: make(chan protocol.ShowMessageParams, 100), served: make(chan error, 1)}
	log := hclog.New(&hclog.LoggerOptions{Output: testWriter{t}, Level: hclog.Warn})
	opts = append([]Option{WithLogger(log), WithDebounce(0)}, opts...)
	go func() { c.served <- Serve(context.Background(), sside, opts...) }()
	c.conn = jsonrpc2.NewConn(jsonrpc2.NewStream(cside))
	c.conn.Go(context.Background(), func(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) error {
		if req.Method() == protocol.MethodTextDocumentPublishDiagnostics {
			var p protocol.PublishDiagnosticsParams
			if err := json.Unmarshal(req.Params(), &p); err != nil {
				t.Errorf("bad publishDiagnostics: %v", err)
			}
			c.diags <- p
		}
		if req.Method() == protocol.MethodWindowShowMessage {
			var p protocol.ShowMessageParams
			if err := json.Unmarshal(req.Params(), &p); err != nil {
				t.Errorf("bad showMessage: %v", err)
			}
			c.shown <- p
		}
		return reply(ctx, nil, nil)
	})
	t.Cleanup(func() { _ = c.conn.Close() })
	return c
}

func (c *testClient) call(method string, params, result any) error {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err := c.conn.Call(ctx, method, params, result)
	return err
}

func (c *testClient) notify(method string, params any) {
	c.t.Helper()
	if err := c.conn.Notify(context.Background(), method, params); err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
}

func (c *testClient) initialize() {
	c.t.Helper()
	var res protocol.InitializeResult
	if err := c.call(protocol.MethodInitialize, &protocol.InitializeParams{}, &res); err != nil {
		c.t.Fatalf("initialize: %v", err)
	}
	c.notify(protocol.MethodInitialized, &protocol.InitializedParams{})
}

// diagnostics waits for the diagnostics of the given version.
func (c *testClient) diagnostics(uri protocol.DocumentURI, version int32) []protocol.Diagnostic {
	c.t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case p := <-c.diags:
			if p.URI == uri && p.Version == uint32(version) {
				return p.Diagnostics
			}
		case <-timeout:
			c.t.Fatalf("no diagnostics for %s version %d", uri, version)
		}
	}
}

func (c *testClient) open(uri protocol.DocumentURI, text string) {
	c.notify(protocol.MethodTextDocumentDidOpen, &protocol.DidOpenTextDocumentParams{
		TextDocument: protocol.TextDocumentItem{URI: uri, LanguageID: "pipe", Version: 1, Text: text}})
}

func (c *testClient) replace(uri protocol.DocumentURI, version int32, text string) {
	c.notify(protocol.MethodTextDocumentDidChange, map[string]any{
		"textDocument":   map[string]any{"uri": uri, "version": version},
		"contentChanges": []map[string]any{{"text": text}},
	})
}

func (c *testClient) shutdown() {
	c.t.Helper()
	if err := c.call(protocol.MethodShutdown, nil, nil); err != nil {
		c.t.Fatalf("shutdown: %v", err)
	}
	c.notify(protocol.MethodExit, nil)
	select {
	case err := <-c.served:
		if err != nil {
			c.t.Fatalf("Serve after shutdown and exit: %v", err)
		}
	case <-time.After(wait):
		c.t.Fatal("Serve did not return after exit")
	}
}

// A mistake after a comment with non-ASCII text: the range must count
// UTF-16 units ("é" is one, "😀" two) where diag counts bytes.
const mistake = "// résumé 😀 net\nmodel m {\n  input [4]\n  dense 8 -> rleu -> dense 2\n}\n"

func TestSessionDiagnosticsAtUTF16Range(t *testing.T) {
	c := startServer(t)
	c.initialize()
	uri := protocol.DocumentURI("file:///tmp/m.pipe")
	c.open(uri, mistake)
	ds := c.diagnostics(uri, 1)
	var found *protocol.Diagnostic
	for i := range ds {
		if strings.Contains(ds[i].Message, "rleu") {
			found = &ds[i]
		}
	}
	if found == nil {
		t.Fatalf("no diagnostic about rleu in %+v", ds)
	}
	want := protocol.Range{Start: protocol.Position{Line: 3, Character: 13}, End: protocol.Position{Line: 3, Character: 17}}
	if found.Range != want {
		t.Errorf("range %v, want %v", found.Range, want)
	}
	if found.Severity != protocol.DiagnosticSeverityError || found.Source != "pipe" {
		t.Errorf("severity %v source %q", found.Severity, found.Source)
	}

	// A change to the same line, ranged after the emoji: UTF-16 again.
	c.notify(protocol.MethodTextDocumentDidChange, map[string]any{
		"textDocument": map[string]any{"uri": uri, "version": 2},
		"contentChanges": []map[string]any{{
			"range": protocol.Range{Start: protocol.Position{Line: 0, Character: 12}, End: protocol.Position{Line: 0, Character: 12}},
			"text":  "!",
		}, {
			"range": want,
			"text":  "relu",
		}},
	})
	if ds := c.diagnostics(uri, 2); len(ds) != 0 {
		t.Errorf("diagnostics after the fix: %+v", ds)
	}
	var hover protocol.Hover
	err := c.call(protocol.MethodTextDocumentHover, &protocol.HoverParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{
		TextDocument: protocol.TextDocumentIdentifier{URI: uri}, Position: protocol.Position{Line: 3, Character: 3}}}, &hover)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(hover.Contents.Value, "`[8]`") || !strings.Contains(hover.Contents.Value, "parameters: 40") {
		t.Errorf("hover on dense 8: %q", hover.Contents.Value)
	}
	c.shutdown()
}

// readFrames reads framed messages from the raw side of a connection.
func readFrames(t *testing.T, r *bufio.Reader, out chan<- map[string]any) {
	s := &stream{in: r, onBad: func(error) {}}
	for {
		data, _, err := s.readFrame()
		if err != nil {
			close(out)
			return
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Errorf("the server wrote a message that is not JSON: %q", data)
		}
		out <- m
	}
}

func TestMalformedMessages(t *testing.T) {
	cside, sside := net.Pipe()
	served := make(chan error, 1)
	go func() { served <- Serve(context.Background(), sside, WithDebounce(0)) }()
	msgs := make(chan map[string]any, 100)
	go readFrames(t, bufio.NewReader(cside), msgs)
	frame := func(body string) string { return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body) }
	next := func() map[string]any {
		t.Helper()
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatal("the server closed the connection")
			}
			return m
		case <-time.After(wait):
			t.Fatal("no answer")
		}
		return nil
	}
	bad := []struct{ name, raw string }{
		{"not JSON", frame(`{"jsonrpc": "2.0", "id": 1, "method": `)},
		{"not JSON-RPC", frame(`[1, 2, 3]`)},
		{"bad id", frame(`{"jsonrpc":"2.0","id":{"x":1},"method":"initialize","params":{}}`)},
		{"bad header", "Content-Lenght 12\r\n\r\n"},
		{"bad length", "Content-Length: lots\r\n\r\n"},
		{"no length", "Content-Type: application/json\r\n\r\n"},
	}
	for _, b := range bad {
		if _, err := io.WriteString(cside, b.raw); err != nil {
			t.Fatalf("%s: %v", b.name, err)
		}
		m := next()
		e, _ := m["error"].(map[string]any)
		if e == nil || m["id"] != nil {
			t.Errorf("%s: answer %v, want an error with id null", b.name, m)
		}
	}
	// Valid messages with bad parameters get errors with their id.
	_, _ = io.WriteString(cside, frame(`{"jsonrpc":"2.0","id":7,"method":"initialize","params":"nonsense"}`))
	if m := next(); m["error"] == nil || m["id"] != float64(7) {
		t.Errorf("bad params: %v", m)
	}
	_, _ = io.WriteString(cside, frame(`{"jsonrpc":"2.0","id":8,"method":"initialize","params":{}}`))
	if m := next(); m["result"] == nil || m["id"] != float64(8) {
		t.Errorf("initialize after the garbage: %v", m)
	}
	_, _ = io.WriteString(cside, frame(`{"jsonrpc":"2.0","id":9,"method":"no/such/method"}`))
	if m := next(); m["error"] == nil {
		t.Errorf("unknown method: %v", m)
	}
	// A hover on a document that is not open, and one with a position
	// far outside the text, are answered.
	_, _ = io.WriteString(cside, frame(`{"jsonrpc":"2.0","id":10,"method":"textDocument/hover","params":{"textDocument":{"uri":"file:///x.pipe"},"position":{"line":0,"character":0}}}`))
	if m := next(); m["error"] == nil {
		t.Errorf("hover on a closed document: %v", m)
	}
	_, _ = io.WriteString(cside, frame(`{"jsonrpc":"2.0","method":"textDocument/didOpen","params":{"textDocument":{"uri":"file:///y.pipe","languageId":"pipe","version":1,"text":"model m {"}}}`))
	if m := next(); m["method"] != protocol.MethodTextDocumentPublishDiagnostics {
		t.Errorf("after didOpen: %v", m)
	}
	_, _ = io.WriteString(cside, frame(`{"jsonrpc":"2.0","id":11,"method":"textDocument/hover","params":{"textDocument":{"uri":"file:///y.pipe"},"position":{"line":4000000000,"character":4000000000}}}`))
	if m := next(); m["error"] != nil || m["id"] != float64(11) {
		t.Errorf("hover far outside: %v", m)
	}
	// The client vanishes: Serve returns, saying there was no shutdown.
	_ = cside.Close()
	select {
	case err := <-served:
		if !errors.Is(err, ErrNoShutdown) {
			t.Errorf("Serve = %v, want ErrNoShutdown", err)
		}
	case <-time.After(wait):
		t.Fatal("Serve did not return when the client went away")
	}
}

// TestPrefixesThroughProtocol types an example in, a few characters per
// change, and checks that the server keeps answering.
func TestPrefixesThroughProtocol(t *testing.T) {
	src := examples(t)["resblock.pipe"]
	c := startServer(t, WithPlanner(graphPlanner))
	c.initialize()
	uri := protocol.DocumentURI("file:///tmp/resblock.pipe")
	c.open(uri, "")
	v := int32(1)
	for i := 0; i < len(src); i += 37 {
		v++
		c.replace(uri, v, src[:i])
		var list protocol.CompletionList
		m := newMapper(src[:i])
		if err := c.call(protocol.MethodTextDocumentCompletion, &protocol.CompletionParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{
			TextDocument: protocol.TextDocumentIdentifier{URI: uri}, Position: m.position(i)}}, &list); err != nil {
			t.Fatalf("completion at %d: %v", i, err)
		}
	}
	v++
	c.replace(uri, v, src)
	if ds := c.diagnostics(uri, v); len(ds) != 0 {
		t.Errorf("the whole example has diagnostics: %+v", ds)
	}
	var edits []protocol.TextEdit
	if err := c.call(protocol.MethodTextDocumentFormatting, &protocol.DocumentFormattingParams{
		TextDocument: protocol.TextDocumentIdentifier{URI: uri}}, &edits); err != nil {
		t.Fatal(err)
	}
	if len(edits) != 0 {
		t.Errorf("the example is formatted already, got edits %+v", edits)
	}
	c.shutdown()
}

// TestChangeCancelsPlanning: the planner of an old version is cancelled
// when a new version arrives, and the check's diagnostics are published
// while the planner still runs.
func TestChangeCancelsPlanning(t *testing.T) {
	var calls atomic.Int32
	cancelled := make(chan struct{})
	slow := func(ctx context.Context, p *lang.Program) (*Costs, diag.Diagnostics) {
		if calls.Add(1) == 1 {
			<-ctx.Done() // a huge model: only cancellation ends it
			close(cancelled)
			return nil, nil
		}
		return GraphCosts(p), diag.Diagnostics{diag.Warnf(p.Models[0].NameRange, "plan", "planned", "")}
	}
	c := startServer(t, WithPlanner(slow))
	c.initialize()
	uri := protocol.DocumentURI("file:///tmp/big.pipe")
	src := "model m {\n  input [4]\n  dense 8\n}\n"
	c.open(uri, src)
	if ds := c.diagnostics(uri, 1); len(ds) != 0 {
		t.Fatalf("check diagnostics: %+v", ds)
	}
	// The server answers while the planner runs.
	var list protocol.CompletionList
	if err := c.call(protocol.MethodTextDocumentCompletion, &protocol.CompletionParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{
		TextDocument: protocol.TextDocumentIdentifier{URI: uri}, Position: protocol.Position{Line: 2, Character: 2}}}, &list); err != nil {
		t.Fatal(err)
	}
	c.replace(uri, 2, src+"\n")
	select {
	case <-cancelled:
	case <-time.After(wait):
		t.Fatal("the first planner was not cancelled")
	}
	c.diagnostics(uri, 2) // the check's
	if ds := c.diagnostics(uri, 2); len(ds) != 1 || ds[0].Message != "planned" {
		t.Errorf("plan diagnostics: %+v", ds)
	}
	c.shutdown()
}

func TestRequestsBeforeInitialize(t *testing.T) {
	c := startServer(t)
	err := c.call(protocol.MethodTextDocumentHover, &protocol.HoverParams{}, nil)
	var je *jsonrpc2.Error
	if !errors.As(err, &je) || je.Code != jsonrpc2.ServerNotInitialized {
		t.Errorf("hover before initialize: %v", err)
	}
	c.notify(protocol.MethodExit, nil)
	select {
	case err := <-c.served:
		if !errors.Is(err, ErrNoShutdown) {
			t.Errorf("exit without shutdown: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("Serve did not return after exit")
	}
}
