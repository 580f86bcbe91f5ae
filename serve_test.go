package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"herald/bolt"
)

func TestRunAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dbPath := filepath.Join(t.TempDir(), "herald.db")
	in := start(t, []string{"--addr", ln.Addr().String(), "--db", dbPath}, nil)
	if got, want := in.wait(t), 1; got != want {
		t.Errorf("run on a taken address = %d, want %d", got, want)
	}
	if logs := in.stderr.String(); !strings.Contains(logs, "address already in use") {
		t.Errorf("log does not say the address is in use:\n%s", logs)
	}
	// Nothing is left behind: the port is tried before the database.
	if _, err := os.Stat(dbPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed start left %s behind (%v)", dbPath, err)
	}
}

// TestSignalTermFinishesRequestInFlight holds a registration open across
// SIGTERM: the request's headers are in (the server has answered "100
// Continue", so a handler is running) when the signal arrives, and its body
// is sent only once the log shows the shutdown has begun. The request must
// still succeed and be on disk, new connections must be refused, and the
// process must exit 0.
func TestSignalTermFinishesRequestInFlight(t *testing.T) {
	p := startProcess(t)
	conn, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(stopTimeout)); err != nil {
		t.Fatal(err)
	}
	const password = "in-flight-password"
	body := fmt.Sprintf(`{"email":"grace@example.com","password":%q}`, password)
	fmt.Fprintf(conn, "POST /api/register HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", p.addr, len(body))
	br := bufio.NewReader(conn)
	req := &http.Request{Method: http.MethodPost}
	cont, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatalf("reading 100 Continue: %v", err)
	}
	if got, want := cont.StatusCode, http.StatusContinue; got != want {
		t.Fatalf("interim status %d, want %d", got, want)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, `msg="shutting down"`)

	// Stop accepting: new connections are refused while the request is
	// still open. Poll, bounded: the listener closes just after the log line.
	deadline := time.Now().Add(startTimeout)
	for {
		c, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("still accepting connections %v after SIGTERM", startTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-p.exited:
		t.Fatalf("herald exited with a request in flight: %v; output:\n%s", p.err, p.stderr)
	default:
	}

	if _, err := io.WriteString(conn, body); err != nil {
		t.Fatalf("sending the body after SIGTERM: %v", err)
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatalf("reading the response: %v; output:\n%s", err, p.stderr)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resp.StatusCode, http.StatusCreated; got != want {
		t.Fatalf("in-flight register: status %d, want %d; body %s", got, want, b)
	}
	var reg tokenResponse
	if err := json.Unmarshal(b, &reg); err != nil || reg.Token == "" {
		t.Errorf("in-flight register body %s: token missing (err %v)", b, err)
	}

	p.waitExit(t)
	out := p.stderr.String()
	if !regexp.MustCompile(`msg=request method=POST path=/api/register status=201\b`).MatchString(out) {
		t.Errorf("no access log line for the in-flight request; output:\n%s", out)
	}
	if strings.Contains(out, password) || (reg.Token != "" && strings.Contains(out, reg.Token)) {
		t.Errorf("log contains the password or token; output:\n%s", out)
	}
	if got, want := checkDB(t, p.dbPath), (bolt.Counts{Users: 1, Tokens: 1}); got != want {
		t.Errorf("after shutdown: %+v, want %+v (the in-flight registration must be on disk)", got, want)
	}
}

// TestRunShutdownTimeout: a request still open when --shutdown-timeout runs
// out makes the stop unclean, and run says so with status 1 instead of
// waiting forever.
func TestRunShutdownTimeout(t *testing.T) {
	in := startListening(t, []string{"--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "herald.db"), "--shutdown-timeout", "50ms"}, nil)
	conn, err := net.Dial("tcp", in.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(stopTimeout)); err != nil {
		t.Fatal(err)
	}
	// Headers only: the handler waits for a body that never comes.
	fmt.Fprintf(conn, "POST /api/register HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n", in.addr)
	cont, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodPost})
	if err != nil {
		t.Fatalf("reading 100 Continue: %v", err)
	}
	if got, want := cont.StatusCode, http.StatusContinue; got != want {
		t.Fatalf("interim status %d, want %d", got, want)
	}
	if got, want := in.stop(t), 1; got != want {
		t.Errorf("run with a request outliving the shutdown timeout = %d, want %d", got, want)
	}
	// The request was cancelled and its connection closed, not left open
	// until the client gives up.
	if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("reading the abandoned connection after shutdown = %v, want it closed by the server", err)
	}
	logs := in.stderr.String()
	if !strings.Contains(logs, "context deadline exceeded") {
		t.Errorf("log does not report the shutdown timeout:\n%s", logs)
	}
	if strings.Contains(logs, "stopped cleanly") {
		t.Errorf("log claims a clean stop:\n%s", logs)
	}
}

// TestSignalEndsStreams: a live stream never ends on its own, yet SIGTERM
// stops the server cleanly and at once: the stream is told to reconnect
// later and closed, instead of holding the shutdown until its timeout.
func TestSignalEndsStreams(t *testing.T) {
	p := startProcess(t)
	base := "http://" + p.addr
	res, body := call(t, newClient(t), http.MethodPost, base+"/api/register", "", map[string]string{"email": "ada@example.com", "password": "correct horse battery"})
	var reg struct{ Token string }
	if err := json.Unmarshal(body, &reg); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("register: %d %s", res.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/api/messages/stream", nil)
	req.Header.Set("Authorization", "Bearer "+reg.Token)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("stream: %v %v", stream, err)
	}
	defer stream.Body.Close()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitExit(t)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("stopping with a stream open took %v; the stream held the shutdown", took)
	}
	rest, _ := io.ReadAll(stream.Body)
	if !strings.Contains(string(rest), "retry:") {
		t.Errorf("the stream ended with %q, want a retry hint", rest)
	}
}

// TestSetProcs: twice the CPUs by default, --procs when given, and
// GOMAXPROCS set by the operator wins; a second serve in one process does
// not double the slots again.
func TestSetProcs(t *testing.T) {
	old := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	runtime.SetDefaultGOMAXPROCS()
	cpus := runtime.GOMAXPROCS(0) // what the runtime chooses on this machine
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tt := range []struct {
		name      string
		procs     int
		vars      map[string]string
		calls     int
		wantProcs int
		wantCPUs  int
	}{
		{"default: twice the CPUs", 0, map[string]string{}, 1, 2 * cpus, cpus},
		{"a second serve in the process does not double it again", 0, map[string]string{}, 3, 2 * cpus, cpus},
		{"--procs", 5, map[string]string{}, 1, 5, cpus},
		// The runtime read the variable at start; here it stands at 3.
		{"GOMAXPROCS wins", 5, map[string]string{"GOMAXPROCS": "3"}, 1, 3, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			runtime.GOMAXPROCS(3)
			var got int
			for range tt.calls {
				got = setProcs(&config{procs: tt.procs}, func(k string) string { return tt.vars[k] }, logger)
			}
			if got != tt.wantCPUs {
				t.Errorf("setProcs reported %d CPUs, want %d", got, tt.wantCPUs)
			}
			if got := runtime.GOMAXPROCS(0); got != tt.wantProcs {
				t.Errorf("GOMAXPROCS %d, want %d", got, tt.wantProcs)
			}
		})
	}
}

// TestSetMemoryLimit: the soft limit follows the hashing slots, and under
// it the collector lets the heap grow 4x; GOGC and GOMEMLIMIT set by the
// operator win.
func TestSetMemoryLimit(t *testing.T) {
	gcPercent := func() int {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p
	}
	oldGC, oldLimit := gcPercent(), debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(oldGC)
		debug.SetMemoryLimit(oldLimit)
	})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tt := range []struct {
		name      string
		vars      map[string]string
		wantLimit int64 // -1: left as it was
		wantGC    int
	}{
		{"defaults", map[string]string{}, 72 << 20, 400},
		{"GOGC set", map[string]string{"GOGC": "50"}, 72 << 20, 100},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, -1, 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			const untouched = 1 << 40
			debug.SetMemoryLimit(untouched)
			cfg := &config{hashConcurrency: 2}
			setMemoryLimit(cfg, func(k string) string { return tt.vars[k] }, logger)
			want := tt.wantLimit
			if want < 0 {
				want = untouched
			}
			if got := debug.SetMemoryLimit(-1); got != want {
				t.Errorf("memory limit %d, want %d", got, want)
			}
			if got := gcPercent(); got != tt.wantGC {
				t.Errorf("GC percent %d, want %d", got, tt.wantGC)
			}
		})
	}
}
