package lsp

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
)

func (c *testClient) hover(uri protocol.DocumentURI, line, char uint32) (string, error) {
	c.t.Helper()
	var h *protocol.Hover
	err := c.call(protocol.MethodTextDocumentHover, &protocol.HoverParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{
		TextDocument: protocol.TextDocumentIdentifier{URI: uri}, Position: protocol.Position{Line: line, Character: char}}}, &h)
	if h == nil {
		return "", err
	}
	return h.Contents.Value, err
}

func (c *testClient) completion(uri protocol.DocumentURI, line, char uint32) ([]protocol.CompletionItem, error) {
	c.t.Helper()
	var list protocol.CompletionList
	err := c.call(protocol.MethodTextDocumentCompletion, &protocol.CompletionParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{
		TextDocument: protocol.TextDocumentIdentifier{URI: uri}, Position: protocol.Position{Line: line, Character: char}}}, &list)
	return list.Items, err
}

const smallModel = "model m {\n  input [4]\n  dense 2\n}\n"

// TestLargeDocument: a document of 17 MiB, more than a pipe file may be,
// is held and refused with a diagnostic on it; the server goes on
// answering about it and about other documents, and analyses it again
// once it shrinks.
func TestLargeDocument(t *testing.T) {
	c := startServer(t)
	c.initialize()
	small := protocol.DocumentURI("file:///tmp/small.pipe")
	c.open(small, smallModel)
	c.diagnostics(small, 1)
	huge := protocol.DocumentURI("file:///tmp/huge.pipe")
	c.open(huge, "// "+strings.Repeat("x", 17<<20)+"\n"+smallModel)
	ds := c.diagnostics(huge, 1)
	if len(ds) != 1 || !strings.Contains(ds[0].Message, "file too large") {
		t.Fatalf("diagnostics of the large document: %+v", ds)
	}
	if md, err := c.hover(huge, 3, 3); err != nil || md != "" {
		t.Errorf("hover on the large document: %q, %v", md, err)
	}
	if items, err := c.completion(huge, 2, 2); err != nil || len(items) != 0 {
		t.Errorf("completion on the large document: %d items, %v", len(items), err)
	}
	if md, err := c.hover(small, 2, 3); err != nil || !strings.Contains(md, "**dense**") {
		t.Errorf("hover on another document: %q, %v", md, err)
	}
	// The first line goes: the document is small again.
	c.notify(protocol.MethodTextDocumentDidChange, map[string]any{
		"textDocument": map[string]any{"uri": huge, "version": 2},
		"contentChanges": []map[string]any{{
			"range": protocol.Range{End: protocol.Position{Line: 1}},
			"text":  "",
		}},
	})
	if ds := c.diagnostics(huge, 2); len(ds) != 0 {
		t.Errorf("diagnostics once it shrank: %+v", ds)
	}
	if md, err := c.hover(huge, 2, 3); err != nil || !strings.Contains(md, "**dense**") {
		t.Errorf("hover once it shrank: %q, %v", md, err)
	}
	c.shutdown()
}

// TestDocumentOverTheMessageLimit: a document sent in a message over the
// limit cannot be read; the server says so on the document and to the
// user, answers requests about it with nothing, answers a request over
// the limit with an error, serves the other documents, and takes the
// document back when it is opened again.
func TestDocumentOverTheMessageLimit(t *testing.T) {
	c := startServer(t, withMaxMessage(64<<10))
	c.initialize()
	small := protocol.DocumentURI("file:///tmp/small.pipe")
	c.open(small, smallModel)
	c.diagnostics(small, 1)
	big := protocol.DocumentURI("file:///tmp/big%20one.pipe")
	c.open(big, "// "+strings.Repeat("é", 64<<10)+"\n"+smallModel)
	ds := c.diagnostics(big, 0)
	if len(ds) != 1 || ds[0].Code != "document-too-large" || !strings.Contains(ds[0].Message, "close and reopen it") {
		t.Fatalf("diagnostics of the document over the limit: %+v", ds)
	}
	select {
	case m := <-c.shown:
		if m.Type != protocol.MessageTypeWarning || !strings.Contains(m.Message, "/tmp/big one.pipe is too large") {
			t.Errorf("message to the user: %+v", m)
		}
	case <-time.After(wait):
		t.Fatal("no message to the user")
	}
	if md, err := c.hover(big, 3, 3); err != nil || md != "" {
		t.Errorf("hover on the lost document: %q, %v", md, err)
	}
	if items, err := c.completion(big, 2, 2); err != nil || len(items) != 0 {
		t.Errorf("completion on the lost document: %d items, %v", len(items), err)
	}
	// A request over the limit is answered, with an error.
	err := c.call(protocol.MethodTextDocumentHover, map[string]any{
		"textDocument": map[string]any{"uri": small}, "position": protocol.Position{Line: 2, Character: 3},
		"padding": strings.Repeat("x", 64<<10)}, nil)
	var je *jsonrpc2.Error
	if !errors.As(err, &je) || !strings.Contains(je.Message, "over the limit") {
		t.Errorf("a request over the limit: %v", err)
	}
	if md, err := c.hover(small, 2, 3); err != nil || !strings.Contains(md, "**dense**") {
		t.Errorf("hover on another document: %q, %v", md, err)
	}
	// Edits to the lost document cannot be applied; its whole text can.
	c.notify(protocol.MethodTextDocumentDidChange, map[string]any{
		"textDocument":   map[string]any{"uri": big, "version": 2},
		"contentChanges": []map[string]any{{"range": protocol.Range{End: protocol.Position{Line: 1}}, "text": ""}},
	})
	c.replace(big, 3, smallModel)
	if ds := c.diagnostics(big, 3); len(ds) != 0 {
		t.Errorf("diagnostics of the whole text: %+v", ds)
	}
	// Closed and opened again, small.
	c.notify(protocol.MethodTextDocumentDidClose, &protocol.DidCloseTextDocumentParams{TextDocument: protocol.TextDocumentIdentifier{URI: big}})
	c.open(big, smallModel)
	if ds := c.diagnostics(big, 1); len(ds) != 0 {
		t.Errorf("diagnostics after reopening: %+v", ds)
	}
	if md, err := c.hover(big, 2, 3); err != nil || !strings.Contains(md, "**dense**") {
		t.Errorf("hover after reopening: %q, %v", md, err)
	}
	c.shutdown()
}

// TestTooLargeReadsWhatItCan: the first and last bytes of a skipped
// message say its method, its id and its document, read by the JSON's
// structure: an "id" or a "uri" nested elsewhere in the parameters is not
// taken for them.
func TestTooLargeReadsWhatItCan(t *testing.T) {
	long := strings.Repeat(`x\"id\":9}`, 10)
	tests := []struct {
		name, head, tail string
		method, uri, id  string
		notification     bool
	}{
		{"id first", `{"jsonrpc":"2.0","id":7,"method":"textDocument/hover","params":{"x":"` + long, long + `"}}`,
			"textDocument/hover", "", "7", false},
		{"id last", `{"jsonrpc":"2.0","method":"textDocument/hover","params":{"x":"` + long, long + `"},"id":"a\"b"}`,
			"textDocument/hover", "", `"a\"b"`, false},
		{"didOpen", `{"jsonrpc":"2.0","method":"textDocument/didOpen","params":{"textDocument":{"uri":"file:///a%20b.pipe","languageId":"pipe","version":1,"text":"` + long,
			long + `"}}}`, "textDocument/didOpen", "file:///a%20b.pipe", "", true},
		{"nested id and uri", `{"jsonrpc":"2.0","method":"x/y","params":{"id":3,"uri":"no","textDocument":{"uri":"file:///y"},"z":"` + long,
			long + `","q":{"id":4}}}`, "x/y", "file:///y", "", true},
		{"garbage", `not json at all "id": 5`, `"id": 6 }`, "", "", "6", false},
	}
	for _, tt := range tests {
		e := &tooLargeError{}
		e.readHead([]byte(tt.head))
		e.readTail([]byte(tt.tail))
		id := ""
		if e.ID != nil {
			b, _ := e.ID.MarshalJSON()
			id = string(b)
		}
		if e.Method != tt.method || e.URI != tt.uri || id != tt.id || e.notification() != tt.notification {
			t.Errorf("%s: method %q uri %q id %s notification %v", tt.name, e.Method, e.URI, id, e.notification())
		}
	}
}
