package lsp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"go.lsp.dev/jsonrpc2"
)

// MaxMessageSize bounds one JSON-RPC message. A message carries at most a
// whole document (syntax.MaxFileSize) plus its JSON escaping; anything
// larger is skipped and answered with a parse error.
const MaxMessageSize = 16 << 20

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
	// onBad is told about each skipped message, for logging.
	onBad func(error)
}

func newStream(rw io.ReadWriteCloser, onBad func(error)) *stream {
	if onBad == nil {
		onBad = func(error) {}
	}
	return &stream{rw: rw, in: bufio.NewReaderSize(rw, 64<<10), onBad: onBad}
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
			s.replyError(jsonrpc2.ParseError, err.Error())
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
	if length > MaxMessageSize {
		n, err := io.CopyN(io.Discard, s.in, length)
		total += n
		if err != nil {
			return nil, total, err
		}
		return nil, total, fmt.Errorf("%w: message of %d bytes is over the limit of %d", errBadFrame, length, MaxMessageSize)
	}
	data := make([]byte, length)
	n, err := io.ReadFull(s.in, data)
	total += int64(n)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		return nil, total, err
	}
	if bad != nil {
		return nil, total, bad
	}
	return data, total, nil
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
	body, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      *int            `json:"id"`
		Error   *jsonrpc2.Error `json:"error"`
	}{"2.0", nil, jsonrpc2.NewError(code, message)})
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
