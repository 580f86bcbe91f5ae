package http

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/julienschmidt/httprouter"

	"herald/http/netquirk"
)

// Responses of Herald's server through netquirk.CoalesceWrites: what
// reaches the socket, counted write by write.

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
		_ = srv.Serve(netquirk.CoalesceWrites(srv, counted))
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
	for _, size := range []int{netquirk.ConnBufferSize - 300, netquirk.ConnBufferSize + 1, 7000, 2*netquirk.ConnBufferSize - 400} {
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
	for _, size := range []int{netquirk.ConnBufferSize - 300, netquirk.ConnBufferSize + 1, 7000, 2*netquirk.ConnBufferSize - 400} {
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
	bodyBefore = netquirk.ConnBufferSize - headerLength(t, addr, "/test/flush", counted)

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /test/flush HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, err := io.ReadFull(conn, make([]byte, netquirk.ConnBufferSize)); err != nil {
		t.Fatal(err)
	}
	close(received)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if w := counted.take(); len(w) == 0 || w[0] != netquirk.ConnBufferSize {
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
	body = netquirk.ConnBufferSize - headerLength(t, addr, "/test/end", counted)

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
	if w := counted.take(); len(w) != 2 || w[0] != netquirk.ConnBufferSize {
		t.Errorf("writes %v, want two of %d", w, netquirk.ConnBufferSize)
	}
}
