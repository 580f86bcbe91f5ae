package netquirk

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
)

// These tests hold net/http to the behaviour the package doc lists. When
// one fails after a Go upgrade, what the package relies on has changed:
// adjust the code, do not loosen the test.

// watchedConn records the size of every write and of every read as it
// starts.
type watchedConn struct {
	net.Conn
	mu     sync.Mutex
	writes []int
	reads  []int
}

func (c *watchedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, len(p))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *watchedConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	c.reads = append(c.reads, len(p))
	c.mu.Unlock()
	return c.Conn.Read(p)
}

func (c *watchedConn) seen() (writes, reads []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.writes...), append([]int(nil), c.reads...)
}

type watchedListener struct {
	net.Listener
	conns chan *watchedConn
}

func (l *watchedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	wc := &watchedConn{Conn: c}
	l.conns <- wc
	return wc, nil
}

// serveWatched serves handler with plain net/http, optionally through
// CoalesceWrites, on a listener whose connections it hands out as they are
// accepted.
func serveWatched(t *testing.T, handler http.HandlerFunc, coalesce bool) (addr string, conns <-chan *watchedConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wl := &watchedListener{Listener: ln, conns: make(chan *watchedConn, 4)}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	var served net.Listener = wl
	if coalesce {
		served = CoalesceWrites(srv, wl)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(served)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return ln.Addr().String(), wl.conns
}

// TestWriteBufferSize: a response larger than the buffer leaves net/http
// first as exactly one full buffer, written from the middle of the
// handler's write, then as the rest.
func TestWriteBufferSize(t *testing.T) {
	const size = 10000
	addr, conns := serveWatched(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(size))
		_, _ = io.WriteString(w, strings.Repeat("x", size))
	}, false)
	res, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || len(body) != size {
		t.Fatalf("got %d bytes, %v", len(body), err)
	}
	writes, _ := (<-conns).seen()
	if len(writes) < 2 || writes[0] != ConnBufferSize {
		t.Fatalf("a %d-byte response left in writes %v; the first should be net/http's whole buffer, %d bytes", size, writes, ConnBufferSize)
	}
}

// TestBackgroundRead: net/http waits for a request with reads larger than
// one byte, and watches for the client leaving, while a handler runs, with
// a read of exactly one byte.
func TestBackgroundRead(t *testing.T) {
	sawOneByteRead := make(chan bool, 1)
	var conn *watchedConn
	ready := make(chan struct{})
	addr, conns := serveWatched(t, func(w http.ResponseWriter, _ *http.Request) {
		<-ready
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if _, reads := conn.seen(); len(reads) > 1 && reads[len(reads)-1] == 1 {
				sawOneByteRead <- true
				return
			}
			time.Sleep(time.Millisecond)
		}
		sawOneByteRead <- false
	}, false)
	go func() {
		conn = <-conns
		close(ready)
	}()
	res, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if !<-sawOneByteRead {
		_, reads := conn.seen()
		t.Fatalf("reads while the handler ran: %v; want net/http's one-byte background read last", reads)
	}
	if _, reads := conn.seen(); reads[0] <= 1 {
		t.Errorf("reads %v: net/http read the request with a read of %d bytes; CoalesceWrites takes only reads of more than one byte to mean a wait for the next request", reads, reads[0])
	}
}

// TestTakeOver: a stream's response, taken over with its status written
// and its body unframed, reaches the client as a status, headers with no
// Transfer-Encoding, and then exactly the bytes written to the connection,
// through CoalesceWrites as Herald serves it.
func TestTakeOver(t *testing.T) {
	addr, _ := serveWatched(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		UnframedBody(w.Header())
		w.WriteHeader(http.StatusOK)
		conn, err := TakeOver(w)
		if err != nil {
			t.Errorf("TakeOver: %v", err)
			return
		}
		_, _ = io.WriteString(conn, "data: one\n\n")
		_, _ = io.WriteString(conn, "data: two\n\n")
		_ = conn.Close()
	}, true)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	raw, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	head, body, ok := strings.Cut(string(raw), "\r\n\r\n")
	if !ok {
		t.Fatalf("no end of headers in %q", raw)
	}
	res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(head+"\r\n\r\n")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("status %d, Content-Type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if strings.Contains(strings.ToLower(head), "transfer-encoding") {
		t.Errorf("headers %q name a transfer encoding; want none", head)
	}
	if body != "data: one\n\ndata: two\n\n" {
		t.Errorf("body %q, want the two events exactly, unframed", body)
	}
}
