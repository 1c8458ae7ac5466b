package serve

import (
	"net"
	"sync"
)

// DefaultMaxConns is the most connections Serve holds open at once when
// Config.MaxConns is 0. A connection costs a goroutine, a file descriptor
// and the part of its body sent so far (at most MaxBody): thousands of
// slow clients fit, and past the limit a new connection waits in the
// listen backlog rather than failing the server.
const DefaultMaxConns = 4096

// limitListener accepts at most n connections open at once; Accept waits
// for one to close past that. It is golang.org/x/net/netutil's
// LimitListener in a few lines, written here because x/net is not a
// dependency of this module and this is all of it that serve needs.
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func limitListen(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

// Accept waits for a free place, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

// Close closes the listener and wakes an Accept waiting for a place.
func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitConn gives its place back once, on its first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
