package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConnsPerAddress: --max-conns-per-address closes a client's
// connections beyond it unanswered, counts them in /metrics and says so in
// the log, and leaves the trusted proxies' connections alone.
func TestConnsPerAddress(t *testing.T) {
	db := filepath.Join(t.TempDir(), "herald.db")
	// healthz asks for /healthz on a connection of its own, left open, and
	// reports whether it was answered.
	healthz := func(t *testing.T, addr string) bool {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: herald\r\n\r\n"); err != nil {
			return false
		}
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("a request got neither an answer nor a close: %v", err)
			}
			return false
		}
		_, _ = io.Copy(io.Discard, res.Body)
		return res.StatusCode == http.StatusOK
	}

	t.Run("limited", func(t *testing.T) {
		in := startListening(t, []string{"--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--db", db, "--max-conns-per-address", "2"}, nil)
		defer in.stop(t)
		for i := range 2 {
			if !healthz(t, in.addr) {
				t.Fatalf("connection %d of 2 was refused", i+1)
			}
		}
		if healthz(t, in.addr) {
			t.Fatal("a third connection from one address was answered")
		}
		m := metricsRE.FindStringSubmatch(in.stderr.String())
		if m == nil {
			t.Fatalf("no metrics listening line:\n%s", in.stderr)
		}
		res, err := newClient(t).Get("http://" + m[1] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if want := "herald_connections_refused_total 1\n"; !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
		// The log is written in batches: the line is out once run returns.
		in.stop(t)
		if want := `msg="connection refused: too many open from one address" addr=127.0.0.1 limit=2 refused=1`; !strings.Contains(in.stderr.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, in.stderr)
		}
	})
	t.Run("trusted proxy", func(t *testing.T) {
		in := startListening(t, []string{"--addr", "127.0.0.1:0", "--db", db, "--max-conns-per-address", "2", "--trusted-proxies", "127.0.0.1"}, nil)
		defer in.stop(t)
		for i := range 4 {
			if !healthz(t, in.addr) {
				t.Fatalf("connection %d of a trusted proxy was refused", i+1)
			}
		}
	})
}
