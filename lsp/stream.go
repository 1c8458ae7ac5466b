package lsp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"go.lsp.dev/jsonrpc2"
)

// MaxMessageSize bounds one JSON-RPC message. It is far above the largest
// pipe file (syntax.MaxFileSize) and above the largest document an editor
// sends with its JSON escaping (VS Code stops syncing documents of 50 MB to
// extensions), so that a document too large to analyse still arrives: the
// server holds its text, says on it that it is too large, and analyses it
// again once it shrinks. A larger message is skipped (see tooLargeError).
const MaxMessageSize = 64 << 20

// tooLargeHead is how much of a message over the limit is read to find
// out what it was: its method, its id and the document it is about.
const tooLargeHead = 64 << 10

// maxHeaderLine bounds one header line, so a client that sends no newline
// cannot make the server buffer without end.
const maxHeaderLine = 4 << 10

// stream is jsonrpc2's base-protocol framing (Content-Length headers) with
// the resilience an editor needs: jsonrpc2.NewStream reports a message it
// cannot decode as a read error, and the connection treats every read error
// as fatal. Here a malformed message — a bad header, an oversized body, text
// that is not JSON, JSON that is not JSON-RPC — is answered with a JSON-RPC
// error response (id null, as JSON-RPC 2.0 asks) and skipped; only the end
// of the input or a failing transport ends the stream.
type stream struct {
	rw  io.ReadWriteCloser
	in  *bufio.Reader
	wmu sync.Mutex // Write is called under the connection's lock; Read's error replies are not
	// onBad is told about each skipped message, for logging, and about a
	// message over the limit (a *tooLargeError), so the server can say so
	// on the document it carried.
	onBad func(error)
	// limit is the largest message read; 0 means MaxMessageSize.
	limit int64
}

func newStream(rw io.ReadWriteCloser, onBad func(error)) *stream {
	if onBad == nil {
		onBad = func(error) {}
	}
	return &stream{rw: rw, in: bufio.NewReaderSize(rw, 64<<10), onBad: onBad}
}

func (s *stream) maxSize() int64 {
	if s.limit > 0 {
		return s.limit
	}
	return MaxMessageSize
}

// tooLargeError is a message skipped for its size. What it was is read
// from its first bytes (tooLargeHead), where clients write them: Method
// and URI (the document of a didOpen or didChange) are empty, and ID is
// nil, when they are not there.
type tooLargeError struct {
	Size, Limit int64
	Method, URI string
	ID          *jsonrpc2.ID
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("%v: message of %d bytes is over the limit of %d", errBadFrame, e.Size, e.Limit)
}

func (e *tooLargeError) Unwrap() error { return errBadFrame }

// notification reports whether the skipped message was a notification,
// which gets no answer: it has a method and no id was found. An id written
// in neither the first nor the last bytes is missed, and the request taken
// for a notification; clients write the id first (vscode-jsonrpc) or last
// (go.lsp.dev/jsonrpc2).
func (e *tooLargeError) notification() bool {
	return e.ID == nil && e.Method != ""
}

// readHead fills in what the first bytes of a skipped message say: its
// method, its id and params.textDocument.uri, walking the JSON tokens of
// the message until the bytes run out.
func (e *tooLargeError) readHead(head []byte) {
	dec := json.NewDecoder(bytes.NewReader(head))
	dec.UseNumber()
	type level struct {
		object bool
		key    string
		isKey  bool // the next token of an object is a key
	}
	var path []*level
	at := func() string {
		parts := make([]string, len(path))
		for i, l := range path {
			parts[i] = l.key
		}
		return strings.Join(parts, ".")
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		if n := len(path); n > 0 && path[n-1].object && path[n-1].isKey {
			if k, ok := tok.(string); ok {
				path[n-1].key, path[n-1].isKey = k, false
				continue
			}
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				path = append(path, &level{object: v == '{', isKey: true})
				continue
			}
			path = path[:max(0, len(path)-1)]
		case string:
			switch at() {
			case "method":
				e.Method = v
			case "params.textDocument.uri":
				e.URI = v
			case "id":
				id := jsonrpc2.NewStringID(v)
				e.ID = &id
			}
		case json.Number:
			if n, err := v.Int64(); err == nil && at() == "id" && n == int64(int32(n)) {
				id := jsonrpc2.NewNumberID(int32(n))
				e.ID = &id
			}
		}
		if n := len(path); n > 0 {
			path[n-1].isKey = true
		}
	}
}

// tailID matches an id written as the message's last member: only the top
// level's last member is followed by one brace and the end.
var tailID = regexp.MustCompile(`"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")\s*\}\s*$`)

// readTail finds the id in the last bytes of a skipped message, when the
// head did not hold it.
func (e *tooLargeError) readTail(tail []byte) {
	if e.ID != nil {
		return
	}
	if m := tailID.FindSubmatch(tail); m != nil {
		var id jsonrpc2.ID
		if id.UnmarshalJSON(m[1]) == nil {
			e.ID = &id
		}
	}
}

// errBadFrame marks a message that was skipped; Read never returns it.
var errBadFrame = errors.New("malformed message")

// Read implements jsonrpc2.Stream.
func (s *stream) Read(ctx context.Context) (jsonrpc2.Message, int64, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		data, n, err := s.readFrame()
		if err != nil {
			if !errors.Is(err, errBadFrame) {
				return nil, n, err
			}
			s.onBad(err)
			var big *tooLargeError
			switch {
			case errors.As(err, &big) && big.notification():
				// Nothing to answer; the server tells the user.
			case big != nil && big.ID != nil:
				s.replyErrorTo(big.ID, jsonrpc2.InvalidRequest, err.Error())
			default:
				s.replyError(jsonrpc2.ParseError, err.Error())
			}
			continue
		}
		msg, err := jsonrpc2.DecodeMessage(data)
		if err != nil {
			code := jsonrpc2.InvalidRequest
			if !json.Valid(data) {
				code = jsonrpc2.ParseError
			}
			err = fmt.Errorf("%w: %v", errBadFrame, err)
			s.onBad(err)
			s.replyError(code, err.Error())
			continue
		}
		return msg, n, nil
	}
}

// readFrame reads the headers and the body of one message. A transport
// error or the end of input is returned as is; a malformed frame is
// reported as errBadFrame after its bytes were consumed.
func (s *stream) readFrame() ([]byte, int64, error) {
	var total int64
	length := int64(-1)
	var bad error
	sawHeader := false
	for {
		line, err := s.readLine()
		total += int64(len(line))
		if err != nil {
			return nil, total, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if !sawHeader {
				continue // stray blank lines between messages
			}
			break
		}
		sawHeader = true
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			bad = fmt.Errorf("%w: header line %q has no colon", errBadFrame, truncate(line, 40))
			continue
		}
		if strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			v, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
			if err != nil || v < 0 {
				bad = fmt.Errorf("%w: bad Content-Length %q", errBadFrame, truncate(value, 40))
				continue
			}
			length = v
		}
	}
	if length < 0 {
		if bad == nil {
			bad = fmt.Errorf("%w: no Content-Length header", errBadFrame)
		}
		return nil, total, bad
	}
	if limit := s.maxSize(); length > limit {
		head := make([]byte, min(length, tooLargeHead))
		n, err := io.ReadFull(s.in, head)
		total += int64(n)
		tail := &tailWriter{size: 1 << 10}
		if err == nil {
			var rest int64
			rest, err = io.CopyN(tail, s.in, length-int64(n))
			total += rest
		}
		if err != nil {
			return nil, total, eof(err)
		}
		big := &tooLargeError{Size: length, Limit: limit}
		big.readHead(head)
		big.readTail(tail.buf)
		return nil, total, big
	}
	// The body is read as it arrives, so a length that overstates it costs
	// only what is sent.
	var body bytes.Buffer
	body.Grow(int(min(length, 1<<20)))
	n, err := body.ReadFrom(io.LimitReader(s.in, length))
	total += n
	if err == nil && n < length {
		err = io.EOF
	}
	if err != nil {
		return nil, total, eof(err)
	}
	if bad != nil {
		return nil, total, bad
	}
	return body.Bytes(), total, nil
}

// eof reports a message cut short as the end of the input.
func eof(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return io.EOF
	}
	return err
}

// readLine reads one header line, bounded by maxHeaderLine: a longer line
// is consumed and returned cut short, which then fails as a header.
func (s *stream) readLine() (string, error) {
	var b strings.Builder
	for {
		frag, err := s.in.ReadSlice('\n')
		if b.Len() < maxHeaderLine {
			b.Write(frag[:min(len(frag), maxHeaderLine-b.Len())])
		}
		switch {
		case err == nil:
			return b.String(), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return b.String(), err
		}
	}
}

// replyError writes a JSON-RPC error response with a null id, which is how
// JSON-RPC 2.0 answers a message whose id could not be read.
func (s *stream) replyError(code jsonrpc2.Code, message string) {
	s.replyErrorTo(nil, code, message)
}

// replyErrorTo writes a JSON-RPC error response to the request with the
// given id (null when nil).
func (s *stream) replyErrorTo(id *jsonrpc2.ID, code jsonrpc2.Code, message string) {
	body, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      *jsonrpc2.ID    `json:"id"`
		Error   *jsonrpc2.Error `json:"error"`
	}{"2.0", id, jsonrpc2.NewError(code, message)})
	_ = s.writeRaw(body)
}

// Write implements jsonrpc2.Stream.
func (s *stream) Write(ctx context.Context, msg jsonrpc2.Message) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return 0, fmt.Errorf("encoding message: %w", err)
	}
	if err := s.writeRaw(body); err != nil {
		return 0, err
	}
	return int64(len(body)), nil
}

func (s *stream) writeRaw(body []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	frame := make([]byte, 0, len(body)+32)
	frame = append(frame, "Content-Length: "...)
	frame = strconv.AppendInt(frame, int64(len(body)), 10)
	frame = append(frame, "\r\n\r\n"...)
	frame = append(frame, body...)
	_, err := s.rw.Write(frame)
	return err
}

// Close implements jsonrpc2.Stream.
func (s *stream) Close() error { return s.rw.Close() }

// isClosed reports whether err means the other side went away, as opposed
// to a fault worth logging.
func isClosed(err error) bool {
	return err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) ||
		errors.Is(err, os.ErrClosed) || errors.Is(err, net.ErrClosed)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// tailWriter keeps the last size bytes written to it.
type tailWriter struct {
	buf  []byte
	size int
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p[max(0, len(p)-w.size):]...)
	if len(w.buf) > w.size {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-w.size:]...)
	}
	return len(p), nil
}
