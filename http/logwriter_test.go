package http_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/auth"
	"herald/bolt"
	heraldhttp "herald/http"
	"herald/http/internal/apitest"
)

// never is a flush interval no test waits for.
const never = time.Hour

func TestLogWriterHoldsLinesUntilFlushed(t *testing.T) {
	out := &apitest.SyncBuffer{}
	w := heraldhttp.NewLogWriter(out, never)
	if _, err := w.Write([]byte("one\n")); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "" {
		t.Fatalf("written before a flush: %q", got)
	}
	w.Flush()
	if got := out.String(); got != "one\n" {
		t.Fatalf("after Flush: %q, want %q", got, "one\n")
	}
}

func TestLogWriterFlushesOnItsOwn(t *testing.T) {
	out := &apitest.SyncBuffer{}
	w := heraldhttp.NewLogWriter(out, 10*time.Millisecond)
	defer w.Close()
	for round := range 3 { // the timer is armed again after each flush
		line := fmt.Sprintf("line %d\n", round)
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return strings.Contains(out.String(), line) }, "%q to be flushed", line)
	}
}

func TestLogWriterFlushesWhenFull(t *testing.T) {
	out := &apitest.SyncBuffer{}
	w := heraldhttp.NewLogWriter(out, never)
	line := strings.Repeat("x", 99) + "\n"
	for range 1000 { // 100 KB, more than one batch
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	got := len(out.String())
	if got == 0 || got%len(line) != 0 {
		t.Fatalf("%d bytes written before any flush, want whole lines and more than none", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := len(out.String()); got != 1000*len(line) {
		t.Fatalf("%d bytes after Close, want %d", got, 1000*len(line))
	}
}

func TestLogWriterCloseFlushesAndWritesThrough(t *testing.T) {
	out := &apitest.SyncBuffer{}
	w := heraldhttp.NewLogWriter(out, never)
	if _, err := w.Write([]byte("before\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("after\n")); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "before\nafter\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestLogWriterConcurrent writes from many goroutines while flushes run:
// every line arrives whole, once, and each writer's lines in order.
func TestLogWriterConcurrent(t *testing.T) {
	out := &apitest.SyncBuffer{}
	w := heraldhttp.NewLogWriter(out, time.Millisecond)
	const writers, lines = 8, 2000
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range lines {
				if _, err := fmt.Fprintf(w, "writer %d line %d %s.\n", g, i, strings.Repeat("y", i%200)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	next := make([]int, writers)
	for line := range strings.Lines(out.String()) {
		var g, i int
		var pad string
		if _, err := fmt.Sscanf(line, "writer %d line %d %s\n", &g, &i, &pad); err != nil || len(pad) != i%200+1 {
			t.Fatalf("garbled line %q: %v", line, err)
		}
		if i != next[g] {
			t.Fatalf("writer %d: line %d after line %d", g, i, next[g]-1)
		}
		next[g]++
	}
	for g, n := range next {
		if n != lines {
			t.Errorf("writer %d: %d lines, want %d", g, n, lines)
		}
	}
}

// TestLogWriterCloseWhileWriting closes the writer while lines still come:
// none is lost, and nothing deadlocks.
func TestLogWriterCloseWhileWriting(t *testing.T) {
	out := &apitest.SyncBuffer{}
	w := heraldhttp.NewLogWriter(out, time.Millisecond)
	const writers, lines = 4, 2000
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range lines {
				if _, err := w.Write([]byte("line\n")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := strings.Count(out.String(), "line\n"); got != writers*lines {
		t.Fatalf("%d lines, want %d", got, writers*lines)
	}
}

// TestAccessLogThroughLogWriter is the server's access log on a LogWriter
// as main sets it up: a request is logged, without its query or token,
// once the interval has passed, with nobody calling Flush.
func TestAccessLogThroughLogWriter(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "herald.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := &apitest.SyncBuffer{}
	w := heraldhttp.NewLogWriter(out, 10*time.Millisecond)
	defer w.Close()
	srv := heraldhttp.NewServer(db, auth.NewHasher(apitest.FastParams, 1), heraldhttp.Config{Logger: slog.New(slog.NewTextHandler(w, nil))})
	req := httptest.NewRequest(http.MethodGet, "/api/messages?q=secretword", nil)
	req.Header.Set("Authorization", "Bearer herald_secrettoken")
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	want := fmt.Sprintf("msg=request method=GET path=/api/messages status=%d", rec.Code)
	waitFor(t, func() bool { return strings.Contains(out.String(), want) }, "the access log line %q", want)
	for _, secret := range []string{"secretword", "secrettoken"} {
		if strings.Contains(out.String(), secret) {
			t.Errorf("the log holds %q:\n%s", secret, out)
		}
	}
}

// waitFor polls cond for up to ten seconds; it asserts an outcome, not how
// soon it came.
func waitFor(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for "+format, args...)
		}
	}
}
