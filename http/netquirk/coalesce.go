package netquirk

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// One write per response.
//
// net/http buffers what a connection sends in a fixed 4 KiB buffer. A
// response that does not fit (a page of twenty messages is about 7 KB)
// leaves in two write(2)s: the full buffer, then the rest when the handler
// returns. Over loopback each write carries the whole TCP path with it, and
// under load the two writes are much of the server's CPU; sending them
// together as one serves more pages a second
// (docs/performance.md, "HTTP: one write per response").
//
// A coalescingConn therefore holds back a write of exactly net/http's
// buffer size and sends it with the write that follows. net/http writes a
// full buffer only from the middle of a larger write, so more bytes follow
// at once — except when a handler flushes, or a response ends, with exactly
// a buffer's worth waiting. So what is held is released by the next read of
// the request stream (which is how net/http waits for the next request, so
// nothing outlives its response), by CloseWrite, by a flush (Release) and
// when a handler takes the connection over (TakeOver). Close drops it; see
// Close for why.

// ConnBufferSize is the size of net/http's per-connection write buffer,
// which its documentation does not state; TestWriteBufferSize fails when a
// Go release changes it.
const ConnBufferSize = 4 << 10

// CoalesceWrites returns ln with each of its connections sending a
// response in one write, and sets srv.ConnContext so handlers can release
// what a connection holds. Serve srv on the listener it returns.
func CoalesceWrites(srv *http.Server, ln net.Listener) net.Listener {
	l := &coalescingListener{Listener: ln, held: newHeldPool()}
	before := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if before != nil {
			ctx = before(ctx, c)
		}
		if cc, ok := c.(*coalescingConn); ok {
			ctx = context.WithValue(ctx, coalescingConnKey{}, cc)
		}
		return ctx
	}
	return l
}

type coalescingListener struct {
	net.Listener
	// held lends buffers to connections only while they hold a write, so
	// idle keep-alive connections hold no memory of their own.
	held *sync.Pool
}

func newHeldPool() *sync.Pool {
	return &sync.Pool{New: func() any { return new([2 * ConnBufferSize]byte) }}
}

func (l *coalescingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &coalescingConn{Conn: c, pool: l.held}, nil
}

type coalescingConnKey struct{}

// coalescingConnFrom returns the connection a request came in on, or nil
// when it was not served through CoalesceWrites.
func coalescingConnFrom(ctx context.Context) *coalescingConn {
	cc, _ := ctx.Value(coalescingConnKey{}).(*coalescingConn)
	return cc
}

type coalescingConn struct {
	net.Conn
	pool *sync.Pool

	// mu guards held: net/http reads in the background (to notice a
	// client leaving) while the handler writes.
	mu     sync.Mutex
	buf    *[2 * ConnBufferSize]byte // from pool while a write is held
	held   []byte                    // within buf
	closed atomic.Bool               // nothing more is held once set
}

func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.held) == 0 {
		if len(p) != ConnBufferSize || c.closed.Load() {
			return c.Conn.Write(p)
		}
		c.buf = c.pool.Get().(*[2 * ConnBufferSize]byte)
		c.held = append(c.buf[:0], p...)
		return len(p), nil
	}
	if len(c.held)+len(p) <= len(c.buf) {
		c.held = append(c.held, p...)
		if err := c.releaseLocked(); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	// Too big to copy: both parts in one writev(2).
	heldN := len(c.held)
	bufs := net.Buffers{c.held, p}
	n, err := bufs.WriteTo(c.Conn)
	c.putBufLocked()
	return max(0, int(n)-heldN), err
}

// Release sends what the connection a request came in on holds back, if
// anything: a handler that flushes wants its bytes on the wire now. ctx is
// the request's; a request not served through CoalesceWrites holds nothing.
func Release(ctx context.Context) error {
	if cc := coalescingConnFrom(ctx); cc != nil {
		return cc.release()
	}
	return nil
}

// release sends what the connection holds, if anything.
func (c *coalescingConn) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.releaseLocked()
}

func (c *coalescingConn) releaseLocked() error {
	if len(c.held) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.held)
	c.putBufLocked()
	return err
}

func (c *coalescingConn) putBufLocked() {
	c.pool.Put(c.buf)
	c.buf, c.held = nil, nil
}

// Read releases what is held before waiting for the client, who may be
// waiting for it — except in net/http's one-byte background read, which
// only watches for the client leaving while the handler runs and may start
// after the handler has written.
func (c *coalescingConn) Read(p []byte) (int, error) {
	if len(p) > 1 {
		if err := c.release(); err != nil {
			return 0, err
		}
	}
	return c.Conn.Read(p)
}

// Close drops what is held rather than send it. net/http closes a
// connection after flushing a finished answer (and CloseWrite, which it
// calls first, has sent it), or to abandon an unfinished one, which the
// client will not get whole either way. Sending would mean waiting, maybe
// for a write in progress to a client that reads nothing, and
// http.Server.Close relies on Close cutting such writes short.
func (c *coalescingConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}

// CloseWrite is how net/http ends a connection gracefully.
func (c *coalescingConn) CloseWrite() error {
	if err := c.release(); err != nil {
		return err
	}
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// NetConn returns the connection underneath, as tls.Conn.NetConn does, for
// settings only it has (socket buffer sizes). Writing to it directly would
// overtake a held write; handlers that take a connection over use TakeOver.
func (c *coalescingConn) NetConn() net.Conn { return c.Conn }
