package connlimit_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"herald/http/connlimit"
)

// lockedBuffer is a log destination the server's goroutines and the test
// share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// limitedServer serves on 127.0.0.1 through Limit with o: GET / answers
// "ok", and GET /takeover takes its connection from net/http and holds it
// until the test ends, as a live stream does.
func limitedServer(t *testing.T, o connlimit.Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var taken sync.WaitGroup
	done := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("GET /takeover", func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		taken.Go(func() {
			defer conn.Close()
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\ntaken\n")
			<-done
		})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(connlimit.Limit(srv, ln, o))
	}()
	t.Cleanup(func() {
		close(done)
		taken.Wait()
		_ = srv.Close()
		<-served
	})
	return ln.Addr().String()
}

// client is one connection of the test's, kept open between requests.
type client struct {
	conn net.Conn
	r    *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &client{conn: conn, r: bufio.NewReader(conn)}
}

// get asks for path on the connection and returns the response's status
// line, or the error that ended the connection instead.
func (c *client) get(path string) (string, error) {
	_ = c.conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c.conn, "GET "+path+" HTTP/1.1\r\nHost: herald\r\n\r\n"); err != nil {
		return "", err
	}
	res, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return "", err
	}
	if path != "/takeover" {
		_, _ = io.Copy(io.Discard, res.Body)
	}
	return res.Status, nil
}

// mustGet asks for path and fails the test unless the answer is a 200.
func (c *client) mustGet(t *testing.T, path string) {
	t.Helper()
	status, err := c.get(path)
	if err != nil || status != "200 OK" {
		t.Fatalf("GET %s: %q, %v; want 200 OK", path, status, err)
	}
}

// refused reports whether the server closed a new connection without
// answering its request.
func refused(t *testing.T, addr string) bool {
	t.Helper()
	_, err := dial(t, addr).get("/")
	if err == nil {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a request on a new connection got no answer and no close: %v", err)
	}
	return true
}

// TestLimitPerAddress: connections beyond the limit are closed unanswered,
// each is counted and logged (at most once a minute), and a place freed by
// a connection that closes can be taken again.
func TestLimitPerAddress(t *testing.T) {
	var refusals atomic.Int64
	var log lockedBuffer
	addr := limitedServer(t, connlimit.Options{
		PerAddress: 3,
		Logger:     slog.New(slog.NewTextHandler(&log, nil)),
		OnRefuse:   func() { refusals.Add(1) },
	})
	var held []*client
	for range 3 {
		c := dial(t, addr)
		c.mustGet(t, "/")
		held = append(held, c)
	}
	for range 2 {
		if !refused(t, addr) {
			t.Fatal("a fourth connection from one address was served")
		}
	}
	if got, want := refusals.Load(), int64(2); got != want {
		t.Errorf("OnRefuse called %d times, want %d", got, want)
	}
	if got, want := strings.Count(log.String(), "connection refused"), 1; got != want {
		t.Errorf("%d log lines about refusals, want %d:\n%s", got, want, log.String())
	}
	if want := `addr=127.0.0.1 limit=3 refused=1`; !strings.Contains(log.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, log.String())
	}
	// The connections held are still served.
	for _, c := range held {
		c.mustGet(t, "/")
	}
	// One closes: its place is free once the server has seen it go.
	_ = held[0].conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for refused(t, addr) {
		if time.Now().After(deadline) {
			t.Fatal("a closed connection's place was not freed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLimitFreesTakenOver: a connection a handler takes over from net/http
// (a live stream) no longer holds a place: the streams' own caps bound it.
func TestLimitFreesTakenOver(t *testing.T) {
	addr := limitedServer(t, connlimit.Options{PerAddress: 2})
	for range 4 {
		dial(t, addr).mustGet(t, "/takeover")
	}
	c := dial(t, addr)
	c.mustGet(t, "/")
	dial(t, addr).mustGet(t, "/")
	if !refused(t, addr) {
		t.Error("a third connection beside two held ones was served")
	}
}

// TestLimitExempt: the connections of an exempt peer, a reverse proxy
// carrying many clients' requests, are not counted, and no limit is no
// limit.
func TestLimitExempt(t *testing.T) {
	for name, o := range map[string]connlimit.Options{
		"exempt":   {PerAddress: 1, Exempt: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		"no limit": {},
	} {
		t.Run(name, func(t *testing.T) {
			addr := limitedServer(t, o)
			for range 5 {
				dial(t, addr).mustGet(t, "/")
			}
		})
	}
}
