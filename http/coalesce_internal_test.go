package http

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/julienschmidt/httprouter"
)

// recordingConn is a net.Conn that keeps each Write it is given, to see
// what a coalescingConn passes on and when.
type recordingConn struct {
	net.Conn // nil: only the methods below are used
	mu       sync.Mutex
	writes   [][]byte
	closed   bool
}

func (r *recordingConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, net.ErrClosed
	}
	r.writes = append(r.writes, bytes.Clone(p))
	return len(p), nil
}

func (r *recordingConn) Read([]byte) (int, error) { return 0, io.EOF }

func (r *recordingConn) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

func (r *recordingConn) got() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes
}

func filled(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

func TestCoalescingConnWrites(t *testing.T) {
	full := filled(connBufferSize, 'a')
	tests := []struct {
		name      string
		fullFirst bool // write a full buffer before do
		do        func(c *coalescingConn) error
		want      [][]byte // what reached the connection underneath, write by write
	}{
		{"a write of another size goes at once", false,
			func(c *coalescingConn) error { _, err := c.Write([]byte("small")); return err },
			[][]byte{[]byte("small")}},
		{"a full buffer waits for what follows", true,
			func(*coalescingConn) error { return nil },
			nil},
		{"a full buffer goes with the rest", true,
			func(c *coalescingConn) error { _, err := c.Write([]byte("rest")); return err },
			[][]byte{append(bytes.Clone(full), "rest"...)}},
		{"a rest too big to copy still follows the full buffer", true,
			func(c *coalescingConn) error {
				n, err := c.Write(filled(3*connBufferSize, 'b'))
				if err == nil && n != 3*connBufferSize {
					err = fmt.Errorf("wrote %d, want %d", n, 3*connBufferSize)
				}
				return err
			},
			// net.Buffers writes one part at a time to anything but a
			// socket; to a *net.TCPConn it is one writev.
			[][]byte{full, filled(3*connBufferSize, 'b')}},
		{"a read releases it", true,
			func(c *coalescingConn) error {
				if _, err := c.Read(make([]byte, 4096)); err != io.EOF {
					return err
				}
				return nil
			},
			[][]byte{full}},
		{"net/http's one-byte background read does not", true,
			func(c *coalescingConn) error {
				if _, err := c.Read(make([]byte, 1)); err != io.EOF {
					return err
				}
				_, err := c.Write([]byte("rest"))
				return err
			},
			[][]byte{append(bytes.Clone(full), "rest"...)}},
		{"close drops it", true,
			func(c *coalescingConn) error { return c.Close() },
			nil},
		{"close write releases it", true,
			func(c *coalescingConn) error { return c.CloseWrite() },
			[][]byte{full}},
		{"taking the connection over releases it", true,
			func(c *coalescingConn) error {
				raw := rawConn(c)
				if _, ok := raw.(*recordingConn); !ok {
					return fmt.Errorf("rawConn gave a %T", raw)
				}
				_, err := raw.Write([]byte("event"))
				return err
			},
			[][]byte{full, []byte("event")}},
		{"nothing is held once closed", false,
			func(c *coalescingConn) error {
				_ = c.Close()
				if _, err := c.Write(full); err == nil {
					return fmt.Errorf("a write after close succeeded")
				}
				return nil
			},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			under := &recordingConn{}
			c := &coalescingConn{Conn: under, pool: newHeldPool()}
			if tt.fullFirst {
				if _, err := c.Write(full); err != nil {
					t.Fatal(err)
				}
			}
			if err := tt.do(c); err != nil {
				t.Fatal(err)
			}
			got := under.got()
			if len(got) != len(tt.want) {
				t.Fatalf("%d writes reached the connection, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if !bytes.Equal(got[i], tt.want[i]) {
					t.Errorf("write %d: %d bytes, want %d", i, len(got[i]), len(tt.want[i]))
				}
			}
		})
	}
}

// countingListener counts the writes each accepted connection makes.
type countingListener struct {
	net.Listener
	mu     sync.Mutex
	writes []int // one entry per write: its size
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, l: l}, nil
}

func (l *countingListener) take() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.writes
	l.writes = nil
	return w
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.l.mu.Lock()
	c.l.writes = append(c.l.writes, len(p))
	c.l.mu.Unlock()
	return c.Conn.Write(p)
}

// serveCounted serves s through CoalesceWrites over a listener that counts
// what reaches the sockets.
func serveCounted(t *testing.T, s *Server) (addr string, counted *countingListener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	counted = &countingListener{Listener: ln}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(CoalesceWrites(srv, counted))
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return ln.Addr().String(), counted
}

// TestResponseLeavesInOneWrite: an answer bigger than net/http's buffer
// reaches the socket in one write, over a connection kept alive for the
// next request.
func TestResponseLeavesInOneWrite(t *testing.T) {
	s, _ := newInternalServer(t)
	for _, size := range []int{connBufferSize - 300, connBufferSize + 1, 7000, 2*connBufferSize - 400} {
		body := strings.Repeat("x", size)
		s.router.GET(fmt.Sprintf("/test/%d", size), func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
			_, _ = io.WriteString(w, body)
		})
	}
	addr, counted := serveCounted(t, s)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for _, size := range []int{connBufferSize - 300, connBufferSize + 1, 7000, 2*connBufferSize - 400} {
		fmt.Fprintf(conn, "GET /test/%d HTTP/1.1\r\nHost: x\r\n\r\n", size)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || len(got) != size || strings.Trim(string(got), "x") != "" {
			t.Fatalf("%d-byte body: got %d bytes, %v", size, len(got), err)
		}
		if w := counted.take(); len(w) != 1 {
			t.Errorf("%d-byte body: %d writes %v, want 1", size, len(w), w)
		}
	}
}

// TestFlushSendsHeldWrite: a handler that flushes with exactly a buffer's
// worth waiting gets it on the wire at once, not when it returns.
func TestFlushSendsHeldWrite(t *testing.T) {
	s, _ := newInternalServer(t)
	const length = 6000
	// The first connection learns how long the headers are; the second
	// fills the buffer to the byte with headers plus body, then flushes
	// and waits for the client to have it all.
	var bodyBefore int
	received := make(chan struct{})
	waited := make(chan error, 1)
	s.router.GET("/test/flush", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		w.Header().Set("Content-Length", fmt.Sprint(length))
		if bodyBefore == 0 {
			_, _ = io.WriteString(w, "x")
			return // short: net/http closes the connection
		}
		_, _ = io.WriteString(w, strings.Repeat("x", bodyBefore))
		if err := http.NewResponseController(w).Flush(); err != nil {
			waited <- err
			return
		}
		select {
		case <-received:
			waited <- nil
		case <-time.After(10 * time.Second):
			waited <- fmt.Errorf("the client never got the flushed bytes")
		}
		_, _ = io.WriteString(w, strings.Repeat("x", length-bodyBefore))
	})
	addr, counted := serveCounted(t, s)
	bodyBefore = connBufferSize - headerLength(t, addr, "/test/flush", counted)

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /test/flush HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, err := io.ReadFull(conn, make([]byte, connBufferSize)); err != nil {
		t.Fatal(err)
	}
	close(received)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if w := counted.take(); len(w) == 0 || w[0] != connBufferSize {
		t.Errorf("writes %v: the flush did not send the full buffer alone", w)
	}
}

// headerLength asks for path, whose handler writes one byte of body and
// stops, and returns how long the response's headers were.
func headerLength(t *testing.T, addr, path string, counted *countingListener) int {
	t.Helper()
	probe, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	fmt.Fprintf(probe, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
	_, _ = io.ReadAll(probe)
	w := counted.take()
	if len(w) != 1 {
		t.Fatalf("probe: writes %v, want 1", w)
	}
	return w[0] - 1
}

// TestResponseEndingOnFullBuffer: a response whose last write is exactly a
// full buffer still reaches a client that waits for it before asking again.
func TestResponseEndingOnFullBuffer(t *testing.T) {
	s, _ := newInternalServer(t)
	body := 0
	s.router.GET("/test/end", func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
		if body == 0 {
			w.Header().Set("Content-Length", "1000") // as many digits as the real one
			_, _ = io.WriteString(w, "x")
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(body))
		_, _ = io.WriteString(w, strings.Repeat("x", body))
	})
	addr, counted := serveCounted(t, s)
	body = connBufferSize - headerLength(t, addr, "/test/end", counted)

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	for range 2 {
		fmt.Fprint(conn, "GET /test/end HTTP/1.1\r\nHost: x\r\n\r\n")
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || len(got) != body {
			t.Fatalf("got %d bytes of %d, %v", len(got), body, err)
		}
	}
	if w := counted.take(); len(w) != 2 || w[0] != connBufferSize {
		t.Errorf("writes %v, want two of %d", w, connBufferSize)
	}
}

// TestCloseDoesNotWaitForWrite: closing a connection cuts short a write
// stuck on a client that reads nothing, as http.Server.Close needs.
func TestCloseDoesNotWaitForWrite(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close() // and never reads
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := &coalescingConn{Conn: server, pool: newHeldPool()}

	wrote := make(chan struct{}, 1)
	stopped := make(chan error, 1)
	go func() {
		chunk := make([]byte, 1<<20)
		for {
			if _, err := c.Write(chunk); err != nil {
				stopped <- err
				return
			}
			select {
			case wrote <- struct{}{}:
			default:
			}
		}
	}()
	<-wrote // the next writes fill the socket's buffers and block
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for a write that cannot finish")
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the write went on after Close")
	}
}
