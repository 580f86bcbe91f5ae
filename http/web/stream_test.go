package web_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"herald/bolt"
	heraldhttp "herald/http"
	"herald/http/internal/apitest"
)

// serverTap sits in front of the server: it records the Last-Event-ID
// header of every stream request and keeps the connection each one came on
// (through http.Server.ConnContext), so a test can cut a browser's stream
// from the server's side; closing that net.Conn ends the stream whether or
// not the server has hijacked it. It also records the query of every
// search.
type serverTap struct {
	mu sync.Mutex
	// silent is how many stream requests, from the next one, get a 200
	// and then nothing at all: a connection that died without a word.
	silent   int
	resumes  []string   // Last-Event-ID of each stream request, "" when absent
	conns    []net.Conn // the connection of each stream request
	searches []url.Values
}

type connKey struct{}

func (tap *serverTap) tune(srv *http.Server) {
	next := srv.Handler
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tap.mu.Lock()
		switch {
		case r.URL.Path == "/api/messages/stream":
			tap.resumes = append(tap.resumes, r.Header.Get("Last-Event-ID"))
			tap.conns = append(tap.conns, r.Context().Value(connKey{}).(net.Conn))
			if tap.silent > 0 {
				tap.silent--
				tap.mu.Unlock()
				playDead(w, r)
				return
			}
		case r.URL.Path == "/api/messages" && r.Method == http.MethodGet:
			tap.searches = append(tap.searches, r.URL.Query())
		}
		tap.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// playDead answers a stream request like Herald, announcing a keep-alive
// every 400 ms, and then sends nothing until the client gives up.
func playDead(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Herald-Stream-Heartbeat", "400")
	w.WriteHeader(http.StatusOK)
	http.NewResponseController(w).Flush()
	select {
	case <-r.Context().Done():
	case <-time.After(30 * time.Second):
	}
}

// requests returns the Last-Event-ID of each stream request so far.
func (tap *serverTap) requests() []string {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	return append([]string(nil), tap.resumes...)
}

// searched returns the query of each search so far.
func (tap *serverTap) searched() []url.Values {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	return append([]url.Values(nil), tap.searches...)
}

// cut closes the connection of the newest stream request.
func (tap *serverTap) cut(t *testing.T) {
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
	tap := &serverTap{}
	e, _ := apitest.Serve(t, apitest.OpenStore(t, filepath.Join(t.TempDir(), "herald.db"), nil), heraldhttp.Config{}, tap.tune)
	const adaEmail, adaPassword = "ada@example.com", "correct horse battery"
	e.Register(adaEmail, adaPassword)
	bob := e.Register("bob@example.com", "staple battery horse")

	b := newWebBrowser(t, e.URL)
	ada := b.person("ada")
	ada.screen("auth")
	ada.login(adaEmail, adaPassword)
	ada.liveOn()

	ada.expectBroken("net::ERR_INCOMPLETE_CHUNKED_ENCODING", "/api/messages/stream")
	// Dropped before any event: the opening block's id is what the page
	// resumes from.
	opened, _, _ := e.DB.ChangeHead(context.Background())
	tap.cut(t)
	ada.waitFor("the page notices the first drop", `document.querySelector('#live').textContent.startsWith('Live updates paused')`)
	const before = "Bob, before the connection drops"
	e.Post(bob, before)
	ada.waitFor("Bob's message posted during the first drop arrives", messageJS(before))
	ada.liveOn()
	seen, _, _ := e.DB.ChangeHead(context.Background())

	tap.cut(t)
	ada.waitFor("the page notices", `document.querySelector('#live').textContent.startsWith('Live updates paused')`)
	away := []string{"Bob, while Ada's stream is down", "Bob again, still while it is down"}
	for _, content := range away {
		e.Post(bob, content)
	}
	if got := tap.requests(); len(got) != 2 {
		t.Fatalf("the page reconnected before the messages were posted: stream requests %q", got)
	}
	for _, content := range away {
		ada.waitFor("a message posted while the stream was down arrives", messageJS(content))
	}
	ada.liveOn()
	got := tap.requests()
	if want := []string{"", strconv.FormatUint(opened, 10), strconv.FormatUint(seen, 10)}; !slices.Equal(got, want) {
		t.Errorf("Last-Event-ID of the stream requests: %q, want %q", got, want)
	}
	if got, want := ada.timelineContents(), []string{away[1], away[0], before}; !slices.Equal(got, want) {
		t.Errorf("Ada's timeline shows %q, want %q", got, want)
	}
}

// TestWebClientSilentStream: a stream whose connection died without a word
// says nothing, not even keep-alives. The page takes 2.5 times the
// keep-alive interval the response announced as a dead connection, says
// so, opens a new stream and shows what is posted from then on.
func TestWebClientSilentStream(t *testing.T) {
	tap := &serverTap{silent: 1}
	e, _ := apitest.Serve(t, apitest.OpenStore(t, filepath.Join(t.TempDir(), "herald.db"), nil), heraldhttp.Config{}, tap.tune)
	const adaEmail, adaPassword = "ada@example.com", "correct horse battery"
	e.Register(adaEmail, adaPassword)
	bob := e.Register("bob@example.com", "staple battery horse")

	b := newWebBrowser(t, e.URL)
	ada := b.person("ada")
	ada.screen("auth")
	ada.expectBroken("net::ERR_ABORTED", "/api/messages/stream")
	ada.login(adaEmail, adaPassword)
	ada.waitFor("the page gives up on the silent stream", `document.querySelector('#live').textContent.startsWith('Live updates paused')`)
	ada.liveOn()
	if got := tap.requests(); len(got) != 2 {
		t.Fatalf("stream requests: %q, want the silent one and one more", got)
	}
	const after = "Bob, after the silence"
	e.Post(bob, after)
	ada.waitFor("Bob's message arrives on the new stream", messageJS(after))
}

// TestWebClientSearchEdits: under a search for words, a live edit that
// takes a shown message out of the results removes it, one that brings a
// message in puts it in its place among the messages loaded, and one that
// keeps it in shows the new text. Whether a message matches is the
// server's to say (whole words, any normalisation form, any case), and
// the page asks it with one search per such update, bounded to the
// message's creation time. An edit to a message older than everything
// loaded is left to the page that would bring it, and costs no request.
// The store's clock stands still here, so every message has the same
// creation time and the page must pick its own out of many.
func TestWebClientSearchEdits(t *testing.T) {
	tap := &serverTap{}
	clock := apitest.NewClock()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "herald.db"), bolt.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := apitest.Serve(t, db, heraldhttp.Config{Now: clock.Now}, tap.tune)
	const adaEmail, adaPassword = "ada@example.com", "correct horse battery"
	ada := e.Register(adaEmail, adaPassword)
	bob := e.Register("bob@example.com", "staple battery horse")
	ids := map[string]float64{}
	post := func(token, content string) {
		ids[content] = e.Post(token, content)["id"].(float64)
	}
	post(bob, "café old") // the 22nd match: beyond page one, as is filler 1
	post(bob, "tea old")
	var fillers []string
	for i := 1; i <= 15; i++ {
		fillers = append(fillers, fmt.Sprintf("café filler %d", i))
	}
	for _, f := range fillers {
		post(bob, f)
	}
	post(bob, "café one")
	post(bob, "café two")
	post(bob, "tea three")
	post(bob, "café four")
	post(ada, "café from Ada, first")
	post(ada, "café from Ada")
	post(ada, "café from Ada, too")

	b := newWebBrowser(t, e.URL)
	p := b.person("ada")
	p.screen("auth")
	p.login(adaEmail, adaPassword)
	// The stream's events can be held back, to test the orders an update
	// and a PATCH's answer can reach the page in: the stream's body goes
	// through a gate that holdStream closes and releaseStream opens.
	webEval[bool](p, `(() => {
		const real = window.fetch;
		window.fetch = async (path, init) => {
			const res = await real(path, init);
			if (!String(path).startsWith('/api/messages/stream') || !res.ok) return res;
			const reader = res.body.getReader();
			const body = new ReadableStream({
				async pull(c) {
					const { value, done } = await reader.read();
					while (window.streamHeld) await window.streamHeld;
					if (done) c.close();
					else c.enqueue(value);
				},
				cancel: (reason) => reader.cancel(reason),
			});
			return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
		};
		window.holdStream = () => {
			window.streamHeld = new Promise((open) => (window.releaseStream = () => {
				window.streamHeld = null;
				open();
			}));
		};
		return true;
	})()`)
	p.search("café", "")
	p.waitFor("page one of the search is shown", `document.querySelectorAll('#messages > li').length === 20 && !document.querySelector('#more').hidden`)
	item := func(content string) string {
		return fmt.Sprintf(`document.querySelector('#messages > li[data-id="%d"]')`, int(ids[content]))
	}

	// Out: a word that only contains the one searched for is another word.
	e.Patch(bob, ids["café two"], "cafés two")
	p.waitFor("the message that left the search is gone", "!"+item("café two"))

	// In: decomposed and in capitals, it is the word searched for; it goes
	// between its neighbours by ID.
	const three = "CAFE\u0301 three"
	e.Patch(bob, ids["tea three"], three)
	p.waitFor("the message that joined the search is shown", messageJS(three))

	// Older than everything loaded: an edit that brings a message in is
	// left to the page that would show it, one that takes a message out
	// changes nothing shown, and neither costs a request.
	e.Patch(bob, ids["tea old"], "café old too")
	e.Patch(bob, ids["café old"], "nothing old")

	// Ada's own edits take two of hers out of her search, one in each
	// order the PATCH's answer and the stream's update can come in; either
	// way the focus, on the message since Save, goes on to its neighbour
	// rather than to <body>.
	//
	// The answer first, as is usual: the stream is held until the page
	// shows the edit; the update's check then finds the message gone.
	first := p.messageSelector("café from Ada, first")
	p.click(first + " button[data-act=edit]")
	p.fill(first+" form.edit textarea", "tea from Ada, first")
	webEval[bool](p, `(window.holdStream(), true)`)
	p.click(first + " button[data-act=save]")
	p.waitFor("the PATCH's answer is shown while the stream is held", messageJS("tea from Ada, first"))
	webEval[bool](p, `(window.releaseStream(), true)`)
	p.waitFor("Ada's first edited message is gone", "!"+item("café from Ada, first"))
	if webEval[bool](p, `document.activeElement === document.body`) {
		t.Error("after Ada's first message left the list, nothing has the focus")
	}
	if got, want := p.text("#notice"), "The message no longer matches the search."; got != want {
		t.Errorf("after Ada's first message left, the page says %q, want %q", got, want)
	}

	// The update first: it can reach the page before the PATCH's answer
	// does (the change is published before its writer hears of it), and
	// the answer is held back until it has.
	mine := p.messageSelector("café from Ada")
	p.click(mine + " button[data-act=edit]")
	p.fill(mine+" form.edit textarea", "tea from Ada")
	webEval[bool](p, `(() => {
		const real = window.fetch;
		const held = new Promise((release) => (window.releasePatch = release));
		window.fetch = async (path, init) => {
			const res = await real(path, init);
			if (init?.method === 'PATCH') {
				window.fetch = real;
				await held;
			}
			return res;
		};
		return true;
	})()`)
	p.click(mine + " button[data-act=save]")
	p.waitFor("the stream's update has come while the PATCH is held", item("café from Ada")+"?.unmatched === true")
	webEval[bool](p, `(window.releasePatch(), true)`)
	p.waitFor("Ada's edited message is gone", "!"+item("café from Ada"))
	if webEval[bool](p, `document.activeElement === document.body`) {
		t.Error("after Ada's message left the list, nothing has the focus")
	}

	// Ada has a message open in the editor when she edits it out of the
	// search on another device: it stays while she is at it, and leaves
	// when she cancels.
	too := p.messageSelector("café from Ada, too")
	p.click(too + " button[data-act=edit]")
	p.waitFor("the editor is open", fmt.Sprintf(`document.querySelector(%q)`, too+" form.edit"))
	asked := len(tap.searched())
	e.Patch(ada, ids["café from Ada, too"], "tea from Ada's phone")
	// The page's answer follows the question by a moment; either way,
	// cancelling must end with the message gone.
	for deadline := time.Now().Add(5 * time.Second); len(tap.searched()) == asked && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if n := webEval[int](p, fmt.Sprintf(`document.querySelectorAll(%q).length`, too+" form.edit")); n != 1 {
		t.Errorf("the editor closed under Ada while the message left the search")
	}
	p.click(too + " button[data-act=cancel]")
	p.waitFor("the message edited elsewhere is gone", "!"+item("café from Ada, too"))
	if got, want := p.text("#notice"), "The message no longer matches the search."; got != want {
		t.Errorf("after the message left, the page says %q, want %q", got, want)
	}

	// Still in: shown as edited, in place.
	const four = "café four, and then edited"
	e.Patch(bob, ids["café four"], four)
	p.waitFor("the edit that stays in the search is shown", messageJS(four))

	want := append([]string{four, three, "café one"}, reversed(fillers[1:])...)
	if got := p.timelineContents(); !slices.Equal(got, want) {
		t.Errorf("the search shows\n%q\nwant\n%q", got, want)
	}
	var checks []url.Values
	for _, q := range tap.searched() {
		if q.Has("since") {
			checks = append(checks, q)
		}
	}
	if len(checks) != 6 {
		t.Errorf("the page asked %d bounded searches, want one for each of the 6 updates within page one: %q", len(checks), checks)
	}
	for _, q := range checks {
		if q.Get("q") != "café" || q.Get("since") != "2026-01-02T15:04:05.000000Z" || q.Get("until") != "2026-01-02T15:04:05.001Z" {
			t.Errorf("a check asked %q, want the search's q bounded to the message's creation time", q)
		}
	}
}

func reversed(s []string) []string {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

// TestWebClientResetKeepsEditor: a stream that resumes from a position the
// change log no longer holds gets a reset, and the page loads its list
// afresh. Not under an open editor, which would go with the list and take
// what was typed in it: the reload waits until the editor closes, and the
// text stays where it was. Closing the editor then brings the list up to
// date, missed messages included.
func TestWebClientResetKeepsEditor(t *testing.T) {
	tap := &serverTap{}
	e, _ := apitest.Serve(t, apitest.OpenStore(t, filepath.Join(t.TempDir(), "herald.db"), nil), heraldhttp.Config{}, tap.tune)
	const adaEmail, adaPassword = "ada@example.com", "correct horse battery"
	adaToken := e.Register(adaEmail, adaPassword)
	bob := e.Register("bob@example.com", "staple battery horse")
	const mine, draft = "Ada's message, about to be edited", "A long rewrite that must not be lost"
	e.Post(adaToken, mine)

	b := newWebBrowser(t, e.URL)
	ada := b.person("ada")
	ada.screen("auth")
	ada.login(adaEmail, adaPassword)
	ada.liveOn()
	sel := ada.messageSelector(mine)
	ada.click(sel + " button[data-act=edit]")
	ada.fill(sel+" form.edit textarea", draft)

	// While the stream is down, changes come and the log forgets them.
	ada.expectBroken("net::ERR_INCOMPLETE_CHUNKED_ENCODING", "/api/messages/stream")
	tap.cut(t)
	ada.waitFor("the page notices the drop", `document.querySelector('#live').textContent.startsWith('Live updates paused')`)
	const missed = "Bob, while Ada's stream was down and forgotten"
	e.Post(bob, missed)
	e.Post(bob, "and once more, so the log holds only this")
	if _, err := e.DB.TrimChanges(context.Background(), 0, 1); err != nil {
		t.Fatal(err)
	}
	ada.liveOn()
	// The page says the list waits for the editor: the reset has come, and
	// with it the stream's place in the log, so what is posted from now on
	// arrives live. Posted before, it could fall before that place and be
	// left to the reload.
	ada.waitFor("the page says the list waits for the editor", `document.querySelector('#notice').textContent.includes('when you close the editor')`)
	const later = "Bob, after the stream came back"
	e.Post(bob, later)
	ada.waitFor("a message posted after the reset arrives live", messageJS(later))
	if got := webEval[string](ada, fmt.Sprintf(`document.querySelector(%q)?.value ?? '(no editor)'`, sel+" form.edit textarea")); got != draft {
		t.Fatalf("after the reset the editor holds %q, want %q", got, draft)
	}
	if got := tap.requests(); len(got) != 2 {
		t.Fatalf("stream requests %q, want the first and one resume", got)
	}

	// Closing the editor carries out the reset: the missed message is shown.
	ada.click(sel + " button[data-act=cancel]")
	ada.waitFor("the list is loaded afresh, with the missed message", messageJS(missed))
	if got := ada.focused(); got == "BODY" {
		t.Error("after the reload nothing has the focus")
	}
}
