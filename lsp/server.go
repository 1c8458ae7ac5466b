package lsp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"pipe/diag"
	"pipe/lang"
	"pipe/lang/syntax"
	"pipe/stdlib"
)

// ErrNoShutdown is returned by Serve when the client sent exit without
// shutdown first, or went away; the protocol asks for exit code 1 then.
var ErrNoShutdown = errors.New("the client did not shut the server down")

// DefaultDebounce is how long the server waits after a change before it
// analyses the document, so a burst of keystrokes costs one analysis.
const DefaultDebounce = 200 * time.Millisecond

// hoverWait bounds how long hover waits for the analysis of the document's
// newest version before it answers from what it has.
const hoverWait = 750 * time.Millisecond

// Option configures Serve.
type Option func(*config)

type config struct {
	log      hclog.Logger
	debounce time.Duration
	schema   lang.Schema
	planner  Planner
	version  string
	// maxMessage is the largest message read; 0 means MaxMessageSize.
	maxMessage int64
}

// WithLogger sets the logger. The default discards everything; the log
// must never go to the protocol's output.
func WithLogger(l hclog.Logger) Option { return func(c *config) { c.log = l } }

// WithDebounce sets the delay between a change and its analysis.
func WithDebounce(d time.Duration) Option { return func(c *config) { c.debounce = d } }

// WithSchema sets the registry used to check, complete and describe; the
// default is stdlib.Schema().
func WithSchema(s lang.Schema) Option { return func(c *config) { c.schema = s } }

// WithPlanner sets the planner run after a clean check. Without one, hover
// shows what the model's graph alone tells (shapes, parameters, memory kept
// for backward at the written batch and precision) and no plan diagnostics
// are published.
func WithPlanner(p Planner) Option { return func(c *config) { c.planner = p } }

// WithVersion sets the version the server reports in initialize.
func WithVersion(v string) Option { return func(c *config) { c.version = v } }

// withMaxMessage lowers the message limit, for tests.
func withMaxMessage(n int64) Option { return func(c *config) { c.maxMessage = n } }

// Serve runs a language server over rw (the client's messages in, the
// server's out) until the client sends exit, the input ends, or ctx is
// cancelled. It returns nil after a shutdown request followed by exit, and
// an error wrapping ErrNoShutdown otherwise.
func Serve(ctx context.Context, rw io.ReadWriteCloser, opts ...Option) error {
	cfg := config{log: hclog.NewNullLogger(), debounce: DefaultDebounce}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.schema == nil {
		cfg.schema = stdlib.Schema()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &server{
		cfg:    cfg,
		log:    cfg.log,
		an:     &analyzer{schema: cfg.schema, planner: cfg.planner, log: cfg.log},
		docs:   map[protocol.DocumentURI]*document{},
		ctx:    ctx,
		exited: make(chan struct{}),
	}
	st := newStream(rw, s.skipped)
	st.limit = cfg.maxMessage
	s.conn = jsonrpc2.NewConn(st)
	h, canceller := jsonrpc2.CancelHandler(s.handle)
	s.cancelRequest = canceller
	s.conn.Go(ctx, h)
	// After exit the read loop may stay blocked on an input that cannot
	// be interrupted (a terminal, a pipe outside the runtime's poller);
	// Serve returns without waiting for it.
	select {
	case <-s.conn.Done():
	case <-s.exited:
	case <-ctx.Done():
		_ = s.conn.Close()
	}
	s.closeAll()
	s.mu.Lock()
	state := s.state
	s.mu.Unlock()
	switch {
	case state == stateExited && s.shutdownSeen:
		return nil
	case state == stateExited:
		return fmt.Errorf("exit before shutdown: %w", ErrNoShutdown)
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %w", ErrNoShutdown, ctx.Err())
	}
	if err := s.conn.Err(); err != nil && !isClosed(err) {
		return fmt.Errorf("%w: connection failed: %w", ErrNoShutdown, err)
	}
	return fmt.Errorf("%w: the input ended", ErrNoShutdown)
}

type serverState int

const (
	stateNew serverState = iota
	stateRunning
	stateShutdown
	stateExited
)

type server struct {
	cfg           config
	log           hclog.Logger
	an            *analyzer
	conn          jsonrpc2.Conn
	ctx           context.Context
	cancelRequest func(jsonrpc2.ID)
	exited        chan struct{}
	exitOnce      sync.Once

	mu           sync.Mutex
	state        serverState
	shutdownSeen bool
	docs         map[protocol.DocumentURI]*document
	// publishMu orders publications, so an older version's diagnostics
	// never overwrite a newer one's.
	publishMu sync.Mutex
}

// document is an open document: its newest text, and the analyses made of
// it so far.
type document struct {
	uri     protocol.DocumentURI
	name    string
	version int32
	text    string
	// cancel stops the pending or running analysis of the newest version.
	cancel context.CancelFunc
	timer  *time.Timer
	// pending is finished when the analysis of the newest version is
	// done or superseded.
	pending *pending
	// checked is the newest analysis whose check finished; planned the
	// newest one the planner finished too. Either may be of an older
	// version than the text.
	checked, planned *analysis
	// lost is set when a message with the document's text was too large
	// to read: the server does not know the text, answers requests about
	// it with nothing, and waits for the document to be opened again (or
	// for a change that gives its whole text).
	lost bool
}

type pending struct {
	version int32
	done    chan struct{}
	once    sync.Once
}

func (p *pending) finish() { p.once.Do(func() { close(p.done) }) }

// handle is the connection's handler. It runs on the connection's read
// loop: notifications that change state are handled there, in order; a
// request takes a snapshot of what it needs there and is answered from its
// own goroutine, so no request holds up the messages behind it.
func (s *server) handle(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("internal error", "method", req.Method(), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = reply(ctx, nil, jsonrpc2.Errorf(jsonrpc2.InternalError, "internal error in %s: %v", req.Method(), r))
		}
	}()
	_, isCall := req.(*jsonrpc2.Call)
	s.log.Trace("received", "method", req.Method(), "call", isCall)

	s.mu.Lock()
	state := s.state
	s.mu.Unlock()
	switch {
	case req.Method() == protocol.MethodExit:
		s.exit()
		return nil
	case state == stateNew && req.Method() != protocol.MethodInitialize:
		if isCall {
			return reply(ctx, nil, jsonrpc2.NewError(jsonrpc2.ServerNotInitialized, "the server is not initialized"))
		}
		return nil
	case state == stateShutdown && isCall:
		return reply(ctx, nil, jsonrpc2.NewError(jsonrpc2.InvalidRequest, "the server is shut down"))
	case state == stateShutdown:
		return nil
	}

	switch req.Method() {
	case protocol.MethodInitialize:
		if state != stateNew {
			return reply(ctx, nil, jsonrpc2.NewError(jsonrpc2.InvalidRequest, "initialize was already sent"))
		}
		var params protocol.InitializeParams
		if err := decode(req, &params); err != nil {
			return reply(ctx, nil, err)
		}
		s.mu.Lock()
		s.state = stateRunning
		s.mu.Unlock()
		return reply(ctx, s.initializeResult(), nil)
	case protocol.MethodInitialized:
		return nil
	case protocol.MethodShutdown:
		s.mu.Lock()
		s.state = stateShutdown
		s.shutdownSeen = true
		s.mu.Unlock()
		s.closeAll()
		return reply(ctx, nil, nil)
	case protocol.MethodCancelRequest:
		var params struct {
			ID json.RawMessage `json:"id"`
		}
		if decode(req, &params) == nil {
			var id jsonrpc2.ID
			if id.UnmarshalJSON(params.ID) == nil {
				s.cancelRequest(id)
			}
		}
		return nil
	case protocol.MethodTextDocumentDidOpen:
		var params protocol.DidOpenTextDocumentParams
		if err := decode(req, &params); err != nil {
			s.log.Warn("bad didOpen", "error", err)
			return nil
		}
		s.open(params.TextDocument)
		return nil
	case protocol.MethodTextDocumentDidChange:
		var params struct {
			TextDocument   protocol.VersionedTextDocumentIdentifier `json:"textDocument"`
			ContentChanges []textChange                             `json:"contentChanges"`
		}
		if err := decode(req, &params); err != nil {
			s.log.Warn("bad didChange", "error", err)
			return nil
		}
		s.change(params.TextDocument.URI, params.TextDocument.Version, params.ContentChanges)
		return nil
	case protocol.MethodTextDocumentDidClose:
		var params protocol.DidCloseTextDocumentParams
		if err := decode(req, &params); err != nil {
			s.log.Warn("bad didClose", "error", err)
			return nil
		}
		s.close(params.TextDocument.URI)
		return nil
	case protocol.MethodTextDocumentHover:
		var params protocol.HoverParams
		if err := decode(req, &params); err != nil {
			return reply(ctx, nil, err)
		}
		return s.async(ctx, reply, req, func() (any, error) { return s.hover(ctx, params) })
	case protocol.MethodTextDocumentCompletion:
		var params protocol.CompletionParams
		if err := decode(req, &params); err != nil {
			return reply(ctx, nil, err)
		}
		text, lost, ok := s.text(params.TextDocument.URI)
		switch {
		case !ok:
			return reply(ctx, nil, unknownDocument(params.TextDocument.URI))
		case lost:
			return reply(ctx, &protocol.CompletionList{Items: []protocol.CompletionItem{}}, nil)
		}
		return s.async(ctx, reply, req, func() (any, error) {
			return complete(s.cfg.schema, text, params.Position), nil
		})
	case protocol.MethodTextDocumentFormatting:
		var params protocol.DocumentFormattingParams
		if err := decode(req, &params); err != nil {
			return reply(ctx, nil, err)
		}
		text, lost, ok := s.text(params.TextDocument.URI)
		switch {
		case !ok:
			return reply(ctx, nil, unknownDocument(params.TextDocument.URI))
		case lost:
			return reply(ctx, []protocol.TextEdit{}, nil)
		}
		return s.async(ctx, reply, req, func() (any, error) { return formatEdits(text) })
	}
	if isCall {
		return reply(ctx, nil, jsonrpc2.Errorf(jsonrpc2.MethodNotFound, "method not supported: %s", req.Method()))
	}
	return nil // unknown notifications ($/setTrace, didSave, ...) are ignored
}

// async answers a request from its own goroutine, under recover.
func (s *server) async(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request, fn func() (any, error)) error {
	go func() {
		var (
			res any
			err error
		)
		func() {
			defer func() {
				if r := recover(); r != nil {
					s.log.Error("internal error", "method", req.Method(), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
					res, err = nil, jsonrpc2.Errorf(jsonrpc2.InternalError, "internal error in %s: %v", req.Method(), r)
				}
			}()
			res, err = fn()
		}()
		if ctx.Err() != nil && err == nil {
			res, err = nil, protocol.ErrRequestCancelled
		}
		if werr := reply(context.WithoutCancel(ctx), res, err); werr != nil && !isClosed(werr) {
			s.log.Debug("reply failed", "method", req.Method(), "error", werr)
		}
	}()
	return nil
}

func decode(req jsonrpc2.Request, v any) error {
	if err := json.Unmarshal(req.Params(), v); err != nil {
		return jsonrpc2.Errorf(jsonrpc2.InvalidParams, "invalid params for %s: %v", req.Method(), err)
	}
	return nil
}

func unknownDocument(uri protocol.DocumentURI) error {
	return jsonrpc2.Errorf(jsonrpc2.InvalidParams, "document %s is not open", uri)
}

func (s *server) initializeResult() *protocol.InitializeResult {
	return &protocol.InitializeResult{
		Capabilities: protocol.ServerCapabilities{
			TextDocumentSync: &protocol.TextDocumentSyncOptions{
				OpenClose: true,
				Change:    protocol.TextDocumentSyncKindIncremental,
			},
			CompletionProvider:         &protocol.CompletionOptions{TriggerCharacters: []string{" ", ">", "(", "["}},
			HoverProvider:              true,
			DocumentFormattingProvider: true,
		},
		ServerInfo: &protocol.ServerInfo{Name: "pipe", Version: s.cfg.version},
	}
}

// exit ends the session: the connection closes, and Serve returns.
func (s *server) exit() {
	s.mu.Lock()
	s.state = stateExited
	s.mu.Unlock()
	s.closeAll()
	_ = s.conn.Close()
	s.exitOnce.Do(func() { close(s.exited) })
}

// closeAll cancels every analysis.
func (s *server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.docs {
		d.stop()
	}
}

func (d *document) stop() {
	if d.timer != nil {
		d.timer.Stop()
	}
	if d.cancel != nil {
		d.cancel()
	}
	if d.pending != nil {
		d.pending.finish()
	}
}

// filename returns the path of a file URI, or the URI itself.
func filename(uri protocol.DocumentURI) string {
	u, err := url.Parse(string(uri))
	if err != nil || u.Scheme != "file" || u.Path == "" {
		return string(uri)
	}
	return u.Path
}

// text returns the newest text of an open document, or lost when the
// server could not read it.
func (s *server) text(uri protocol.DocumentURI) (text string, lost, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.docs[uri]
	if !ok {
		return "", false, false
	}
	return d.text, d.lost, true
}

func (s *server) open(item protocol.TextDocumentItem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.docs[item.URI]; ok {
		old.stop()
	}
	d := &document{uri: item.URI, name: filename(item.URI), version: item.Version, text: item.Text}
	s.docs[item.URI] = d
	s.schedule(d, 0)
}

func (s *server) change(uri protocol.DocumentURI, version int32, changes []textChange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.docs[uri]
	if !ok {
		s.log.Warn("change to a document that is not open", "uri", uri)
		return
	}
	d.version = version
	if d.lost {
		// Only a change that gives the whole text brings it back.
		whole := -1
		for i, c := range changes {
			if c.Range == nil {
				whole = i
			}
		}
		if whole < 0 {
			return
		}
		d.lost, d.text, changes = false, "", changes[whole:]
	}
	d.text = applyChanges(d.text, changes)
	s.schedule(d, s.cfg.debounce)
}

// skipped is told about each message the stream skipped. A document whose
// didOpen or didChange was too large to read is marked lost, with a
// diagnostic on it and a message to the user; every other request goes
// on being served.
func (s *server) skipped(err error) {
	s.log.Warn("skipped a malformed message", "error", err)
	var big *tooLargeError
	if !errors.As(err, &big) || big.URI == "" ||
		(big.Method != protocol.MethodTextDocumentDidOpen && big.Method != protocol.MethodTextDocumentDidChange) {
		return
	}
	s.mu.Lock()
	running := s.state == stateRunning
	uri := protocol.DocumentURI(big.URI)
	if running {
		d, ok := s.docs[uri]
		if ok {
			d.stop()
		} else {
			d = &document{uri: uri, name: filename(uri)}
			s.docs[uri] = d
		}
		d.lost, d.text, d.checked, d.planned = true, "", nil, nil
	}
	s.mu.Unlock()
	if !running {
		return
	}
	detail := fmt.Sprintf("The editor sent the document in a message of %s bytes, over the limit of %s, so pipe's language server "+
		"did not read it. A pipe file holds at most %s bytes. Make the document smaller, then close and reopen it.",
		thousands(big.Size), thousands(big.Limit), thousands(syntax.MaxFileSize))
	s.publishMu.Lock()
	s.notify(protocol.MethodTextDocumentPublishDiagnostics, &protocol.PublishDiagnosticsParams{
		URI: uri,
		Diagnostics: []protocol.Diagnostic{{Severity: protocol.DiagnosticSeverityError, Source: "pipe", Code: "document-too-large",
			Message: "document too large for the language server\n" + detail}},
	})
	s.publishMu.Unlock()
	s.notify(protocol.MethodWindowShowMessage, &protocol.ShowMessageParams{Type: protocol.MessageTypeWarning,
		Message: fmt.Sprintf("pipe: %s is too large for the language server. %s", filename(uri), detail)})
}

func (s *server) close(uri protocol.DocumentURI) {
	s.mu.Lock()
	d, ok := s.docs[uri]
	if ok {
		d.stop()
		delete(s.docs, uri)
	}
	s.mu.Unlock()
	if ok {
		s.publishMu.Lock()
		defer s.publishMu.Unlock()
		s.notify(protocol.MethodTextDocumentPublishDiagnostics,
			&protocol.PublishDiagnosticsParams{URI: uri, Diagnostics: []protocol.Diagnostic{}})
	}
}

// schedule starts the analysis of the document's newest version after the
// delay, cancelling the one before. s.mu is held.
func (s *server) schedule(d *document, delay time.Duration) {
	d.stop()
	ctx, cancel := context.WithCancel(s.ctx)
	p := &pending{version: d.version, done: make(chan struct{})}
	d.cancel, d.pending = cancel, p
	uri, name, version, text := d.uri, d.name, d.version, d.text
	d.timer = time.AfterFunc(delay, func() { s.analyse(ctx, uri, name, version, text, p) })
}

// analyse checks one version of a document, publishes the check's
// diagnostics, then plans it and publishes again. It runs in its own
// goroutine; ctx is cancelled when a newer version arrives.
func (s *server) analyse(ctx context.Context, uri protocol.DocumentURI, name string, version int32, text string, p *pending) {
	defer p.finish()
	if ctx.Err() != nil {
		return
	}
	start := time.Now()
	an := s.an.check(name, version, text)
	s.log.Debug("checked", "uri", uri, "version", version, "diagnostics", len(an.diags), "took", time.Since(start))
	if !s.store(ctx, uri, an, false) {
		return
	}
	pa := s.an.plan(ctx, an)
	if pa == nil || pa == an {
		return
	}
	s.log.Debug("planned", "uri", uri, "version", version, "diagnostics", len(pa.diags), "took", time.Since(start))
	s.store(ctx, uri, pa, true)
}

// store records an analysis and publishes its diagnostics, unless a newer
// version has arrived; it reports whether it did.
func (s *server) store(ctx context.Context, uri protocol.DocumentURI, an *analysis, planned bool) bool {
	s.publishMu.Lock()
	defer s.publishMu.Unlock()
	s.mu.Lock()
	d, ok := s.docs[uri]
	current := ok && d.version == an.version && ctx.Err() == nil
	if current {
		d.checked = an
		if planned {
			d.planned = an
		}
	}
	s.mu.Unlock()
	if !current {
		return false
	}
	s.notify(protocol.MethodTextDocumentPublishDiagnostics, &protocol.PublishDiagnosticsParams{
		URI:         uri,
		Version:     uint32(max(an.version, 0)),
		Diagnostics: toProtocol(newMapper(an.text), an.diags),
	})
	return true
}

func (s *server) notify(method string, params any) {
	if err := s.conn.Notify(s.ctx, method, params); err != nil && !isClosed(err) && s.ctx.Err() == nil {
		s.log.Debug("notify failed", "method", method, "error", err)
	}
}

// toProtocol converts diagnostics, positions from bytes to UTF-16.
func toProtocol(m *mapper, ds diag.Diagnostics) []protocol.Diagnostic {
	out := make([]protocol.Diagnostic, 0, len(ds))
	for _, d := range ds {
		var r protocol.Range
		if d.Subject != nil {
			r = m.rng(*d.Subject)
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += "\n" + d.Detail
		}
		pd := protocol.Diagnostic{Range: r, Severity: severity(d.Severity), Source: "pipe", Message: msg}
		if d.Code != "" {
			pd.Code = d.Code
		}
		out = append(out, pd)
	}
	return out
}

func severity(s diag.Severity) protocol.DiagnosticSeverity {
	switch s {
	case diag.Error:
		return protocol.DiagnosticSeverityError
	case diag.Warning:
		return protocol.DiagnosticSeverityWarning
	}
	return protocol.DiagnosticSeverityInformation
}

// current returns the newest analysis of a document, waiting up to
// hoverWait (or until ctx ends) for the analysis of its newest version.
// The result may be of an older version, or nil.
func (s *server) current(ctx context.Context, uri protocol.DocumentURI, wantPlan bool) (*analysis, string, bool) {
	deadline := time.NewTimer(hoverWait)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		d, ok := s.docs[uri]
		if !ok {
			s.mu.Unlock()
			return nil, "", false
		}
		if d.lost {
			s.mu.Unlock()
			return nil, "", true
		}
		an, text, p := d.checked, d.text, d.pending
		if wantPlan && s.cfg.planner != nil && d.planned != nil && d.planned.version == d.version {
			an = d.planned
		}
		s.mu.Unlock()
		done := an != nil && an.version == p.version && (!wantPlan || s.cfg.planner == nil || an.planned || an.diags.HasErrors())
		if done {
			return an, text, true
		}
		select {
		case <-p.done:
			// Finished or superseded: look again. A superseded wait sees
			// a new pending; a finished one sees the result.
			s.mu.Lock()
			same := s.docs[uri] != nil && s.docs[uri].pending == p
			s.mu.Unlock()
			if same {
				return s.latest(uri)
			}
		case <-ctx.Done():
			return s.latest(uri)
		case <-deadline.C:
			return s.latest(uri)
		}
	}
}

func (s *server) latest(uri protocol.DocumentURI) (*analysis, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.docs[uri]
	if !ok {
		return nil, "", false
	}
	an := d.checked
	if d.planned != nil && an != nil && d.planned.version == an.version {
		an = d.planned
	}
	return an, d.text, true
}
