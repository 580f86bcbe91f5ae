package http_test

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	heraldhttp "herald/http"
)

// streamTap sits in front of the server: it records the Last-Event-ID
// header of every stream request and keeps the connection each one came on
// (through http.Server.ConnContext), so a test can cut a browser's stream
// from the server's side. Closing that net.Conn ends the stream whether or
// not the server has hijacked it.
type streamTap struct {
	mu      sync.Mutex
	resumes []string   // Last-Event-ID of each stream request, "" when absent
	conns   []net.Conn // the connection of each stream request
}

type connKey struct{}

func (tap *streamTap) tune(srv *http.Server) {
	next := srv.Handler
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/messages/stream" {
			tap.mu.Lock()
			tap.resumes = append(tap.resumes, r.Header.Get("Last-Event-ID"))
			tap.conns = append(tap.conns, r.Context().Value(connKey{}).(net.Conn))
			tap.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

// requests returns the Last-Event-ID of each stream request so far.
func (tap *streamTap) requests() []string {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	return append([]string(nil), tap.resumes...)
}

// cut closes the connection of the newest stream request.
func (tap *streamTap) cut(t *testing.T) {
	t.Helper()
	tap.mu.Lock()
	defer tap.mu.Unlock()
	if len(tap.conns) == 0 {
		t.Fatal("no stream to cut")
	}
	if err := tap.conns[len(tap.conns)-1].Close(); err != nil {
		t.Fatalf("closing the stream's connection: %v", err)
	}
}

// TestWebClientResume: when the live stream's connection drops, the page
// says so, reconnects on its own (after the server's 3 s retry hint),
// sending the id of the last event it saw as Last-Event-ID, and shows what
// was posted while it was away, newest first like the rest of the
// timeline. The missed messages arrive back to back, two live insertions in
// a row, which once put the newer one below the older.
func TestWebClientResume(t *testing.T) {
	tap := &streamTap{}
	e, _ := serveDB(t, openDB(t, filepath.Join(t.TempDir(), "herald.db")), heraldhttp.Config{}, tap.tune)
	const adaEmail, adaPassword = "ada@example.com", "correct horse battery"
	e.register(adaEmail, adaPassword)
	bob := e.register("bob@example.com", "staple battery horse")

	b := newWebBrowser(t, e.URL)
	ada := b.person("ada")
	ada.screen("auth")
	ada.login(adaEmail, adaPassword)
	ada.waitFor("live updates are on", `document.querySelector('#live').textContent === 'Live updates are on.'`)

	const before = "Bob, before the connection drops"
	e.post(bob, before)
	ada.waitFor("Bob's first message arrives", messageJS(before))
	seen, _ := e.DB.ChangeHead()

	ada.expectBroken("net::ERR_INCOMPLETE_CHUNKED_ENCODING", "/api/messages/stream")
	tap.cut(t)
	ada.waitFor("the page notices", `document.querySelector('#live').textContent.startsWith('Live updates paused')`)
	away := []string{"Bob, while Ada's stream is down", "Bob again, still while it is down"}
	for _, content := range away {
		e.post(bob, content)
	}
	if got := tap.requests(); len(got) != 1 {
		t.Fatalf("the page reconnected before the messages were posted: stream requests %q", got)
	}
	for _, content := range away {
		ada.waitFor("a message posted while the stream was down arrives", messageJS(content))
	}
	ada.waitFor("live updates are on again", `document.querySelector('#live').textContent === 'Live updates are on.'`)
	got := tap.requests()
	if len(got) != 2 || got[0] != "" || got[1] != strconv.FormatUint(seen, 10) {
		t.Errorf("Last-Event-ID of the stream requests: %q, want [\"\" %q]", got, strconv.FormatUint(seen, 10))
	}
	if got, want := ada.timelineContents(), []string{away[1], away[0], before}; !slices.Equal(got, want) {
		t.Errorf("Ada's timeline shows %q, want %q", got, want)
	}
}
