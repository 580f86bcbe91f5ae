package http_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"herald/auth"
	heraldhttp "herald/http"
	"herald/http/internal/apitest"
	"herald/http/stream"
	"herald/model"
)

// sseEvent is one event as a client parses it; comment-only blocks are
// reported too, with only Comments set.
type sseEvent struct {
	ID, Event, Data string
	Retry           string
	Comments        []string
}

// sseStream is an open stream read by a goroutine into a channel, so tests
// can wait for an event with a deadline.
type sseStream struct {
	t      *testing.T
	resp   *http.Response
	events chan sseEvent
	done   chan struct{} // closed when the server ends the stream or the client closes it
	err    error         // why reading stopped; read after done
	cancel context.CancelFunc
	// skipped holds the unnamed blocks (the opening, heartbeats) next
	// passed over, for a failure to show.
	skipped []sseEvent
}

// openStream opens GET /api/messages/stream?query with token, sending
// lastEventID as the Last-Event-ID header when it is not empty.
func openStream(e *apitest.Env, token, query, lastEventID string) *sseStream {
	e.T.Helper()
	res, st := tryStream(e, token, query, lastEventID)
	if res != nil {
		e.T.Fatalf("stream %q: status %d: %s", query, res.Status, res.Body)
	}
	return st
}

// tryStream opens a stream; a refusal comes back as a response instead.
func tryStream(e *apitest.Env, token, query, lastEventID string) (*apitest.Response, *sseStream) {
	e.T.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+"/api/messages/stream?"+query, nil)
	if err != nil {
		e.T.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		e.T.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return &apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		e.T.Errorf("stream Content-Type = %q", ct)
	}
	st := &sseStream{t: e.T, resp: resp, events: make(chan sseEvent, 10000), done: make(chan struct{}), cancel: cancel}
	go st.read()
	e.T.Cleanup(st.close)
	return nil, st
}

func (st *sseStream) read() {
	defer close(st.done)
	r := bufio.NewReader(st.resp.Body)
	var ev sseEvent
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			st.err = err
			return
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			st.events <- ev
			ev = sseEvent{}
			continue
		}
		if c, ok := strings.CutPrefix(line, ":"); ok {
			ev.Comments = append(ev.Comments, strings.TrimSpace(c))
			continue
		}
		field, value, _ := strings.Cut(line, ": ")
		switch field {
		case "id":
			ev.ID = value
		case "event":
			ev.Event = value
		case "data":
			ev.Data = value
		case "retry":
			ev.Retry = value
		default:
			st.t.Errorf("unknown stream field in %q", line)
		}
	}
}

func (st *sseStream) close() {
	st.cancel()
	st.resp.Body.Close()
	<-st.done
}

// next returns the next event that has a name, skipping comments.
func (st *sseStream) next() sseEvent {
	st.t.Helper()
	ev, ok := st.tryNext(5 * time.Second)
	if !ok {
		st.t.Fatalf("no event within 5s; before it the stream sent only %+v", st.skipped)
	}
	return ev
}

// tryNext is next waiting at most d, reporting false when nothing came.
func (st *sseStream) tryNext(d time.Duration) (sseEvent, bool) {
	st.t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev := <-st.events:
			if ev.Event != "" {
				return ev, true
			}
			st.skipped = append(st.skipped, ev)
		case <-st.done:
			// Drain what was read before the end.
			select {
			case ev := <-st.events:
				if ev.Event != "" {
					return ev, true
				}
				st.skipped = append(st.skipped, ev)
				continue
			default:
			}
			st.t.Fatalf("stream ended (%v) while waiting for an event; before it the stream sent only %+v", st.err, st.skipped)
		case <-timeout:
			return sseEvent{}, false
		}
	}
}

// expectQuiet fails if a named event arrives within d.
func (st *sseStream) expectQuiet(d time.Duration) {
	st.t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev := <-st.events:
			if ev.Event != "" {
				st.t.Fatalf("unexpected event %+v", ev)
			}
		case <-timeout:
			return
		}
	}
}

// expectEnd waits for the server to end the stream.
func (st *sseStream) expectEnd(within time.Duration) {
	st.t.Helper()
	select {
	case <-st.done:
	case <-time.After(within):
		st.t.Fatalf("stream still open after %v", within)
	}
}

// summary renders an event as "kind #messageID content".
func (ev sseEvent) summary(t *testing.T) string {
	t.Helper()
	var m struct {
		ID      uint64 `json:"id"`
		Content string `json:"content"`
		User    struct {
			Email string `json:"email"`
		} `json:"user"`
	}
	if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
		t.Fatalf("event data %q: %v", ev.Data, err)
	}
	if ev.Event == "message.deleted" {
		return fmt.Sprintf("deleted #%d", m.ID)
	}
	return fmt.Sprintf("%s #%d %s", strings.TrimPrefix(ev.Event, "message."), m.ID, m.Content)
}

func (st *sseStream) nextSummaries(t *testing.T, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		ev, ok := st.tryNext(5 * time.Second)
		if !ok {
			t.Fatalf("event %d of %d did not come within 5s; the stream sent %q, then only %+v", i+1, n, out[:i], st.skipped)
		}
		out[i] = ev.summary(t)
	}
	return out
}

// TestStreamDeliversChanges: creates, updates and deletes arrive as
// events in commit order, each with a rising id, with the contract's
// payloads; the stream opens with a retry hint.
func TestStreamDeliversChanges(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	st := openStream(e, ada, "", "")
	first := <-st.events
	if first.Retry == "" || len(first.Comments) == 0 {
		t.Errorf("stream opened with %+v, want a retry hint and a comment", first)
	}

	m := e.Post(ada, "hello stream")
	e.Patch(ada, m["id"].(float64), "hello again")
	e.Remove(ada, m["id"].(float64))
	evs := []sseEvent{st.next(), st.next(), st.next()}
	want := []string{"created #1 hello stream", "updated #1 hello again", "deleted #1"}
	for i, ev := range evs {
		if got := ev.summary(t); got != want[i] {
			t.Errorf("event %d = %q, want %q", i, got, want[i])
		}
		if ev.ID != strconv.Itoa(i+1) {
			t.Errorf("event %d has id %q, want %d", i, ev.ID, i+1)
		}
	}
	// The created event carries the message exactly as GET shows it.
	var created, got map[string]any
	_ = json.Unmarshal([]byte(evs[0].Data), &created)
	if created["user"].(map[string]any)["email"] != "ada@example.com" || created["createdAt"] == nil || created["updatedAt"] == nil {
		t.Errorf("created event data = %s", evs[0].Data)
	}
	if err := json.Unmarshal([]byte(evs[2].Data), &got); err != nil || len(got) != 1 || got["id"] != 1.0 {
		t.Errorf("deleted event data = %s, want {\"id\":1}", evs[2].Data)
	}

	// Many writers at once: every create arrives once, in commit order,
	// which is the order of the message IDs the store handed out.
	const writers, each = 8, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e.Post(ada, fmt.Sprintf("writer %d post %d", w, i))
			}
		}()
	}
	wg.Wait()
	lastID, lastMsg := 3, 1
	for range writers * each {
		ev := st.next()
		id, _ := strconv.Atoi(ev.ID)
		var m struct{ ID int }
		_ = json.Unmarshal([]byte(ev.Data), &m)
		if ev.Event != "message.created" || id != lastID+1 || m.ID != lastMsg+1 {
			t.Fatalf("event %s %s after id %d (message %d): out of order, missing or repeated", ev.ID, ev.Data, lastID, lastMsg)
		}
		lastID, lastMsg = id, m.ID
	}
	st.expectQuiet(100 * time.Millisecond)
}

// TestStreamFilters: q and owner filter like search; an update passes when
// the message matched before or after it; a deletion passes by the
// message as it was. Each change reaches a stream that watches them all
// before the next is made: live streams are sent the changes the hub has
// rendered, and one rendered only after the next edit of its message
// committed shows the message as that edit left it.
func TestStreamFilters(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	bob := e.Register("bob@example.com", "correct horse battery")
	byWord := openStream(e, bob, "q=Caf%C3%A9", "")
	byOwner := openStream(e, bob, "owner=ADA@example.com", "")
	both := openStream(e, bob, "q=cafe%CC%81&owner=bob@example.com", "")
	watcher := openStream(e, ada, "", "")
	seen := func() { watcher.next() }

	a1 := e.Post(ada, "café with ada") // word, ada
	seen()
	e.Post(bob, "tea with bob") // neither
	seen()
	b1 := e.Post(bob, "CAFÉ with bob") // word, bob
	seen()
	e.Patch(ada, a1["id"].(float64), "now tea") // left the word: passes by before
	seen()
	e.Patch(ada, a1["id"].(float64), "still tea") // never the word: ada only
	seen()
	e.Remove(bob, b1["id"].(float64)) // word, bob

	wants := map[*sseStream][]string{
		byWord:  {"created #1 café with ada", "created #3 CAFÉ with bob", "updated #1 now tea", "deleted #3"},
		byOwner: {"created #1 café with ada", "updated #1 now tea", "updated #1 still tea"},
		both:    {"created #3 CAFÉ with bob", "deleted #3"},
	}
	for st, want := range wants {
		got := st.nextSummaries(t, len(want))
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("filtered stream got %q, want %q", got, want)
		}
		st.expectQuiet(50 * time.Millisecond)
	}
}

// TestStreamRequests: the stream's refusals are problem documents naming
// what is wrong.
func TestStreamRequests(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	for _, tc := range []struct {
		name, token, query, lastEventID string
		status                          int
		param                           string
	}{
		{"no token", "", "", "", http.StatusUnauthorized, ""},
		{"bad token", "not-a-token", "", "", http.StatusUnauthorized, ""},
		{"unknown parameter", ada, "since=2026-01-01T00:00:00Z", "", http.StatusBadRequest, "since"},
		{"repeated parameter", ada, "q=a&q=b", "", http.StatusBadRequest, "q"},
		{"q without words", ada, "q=%21%21", "", http.StatusBadRequest, "q"},
		{"q with too many words", ada, "q=" + strings.Repeat("w", 0) + "a+b+c+d+e+f+g+h+i+j+k+l+m+n+o+p+q", "", http.StatusBadRequest, "q"},
		{"owner only spaces", ada, "owner=%20%20", "", http.StatusBadRequest, "owner"},
		{"owner invalid UTF-8", ada, "owner=a%FF%40b.c", "", http.StatusBadRequest, "owner"},
		{"bad Last-Event-ID", ada, "", "seven", http.StatusBadRequest, "Last-Event-ID"},
		{"bad lastEventId", ada, "lastEventId=-1", "", http.StatusBadRequest, "lastEventId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := tryStream(e, tc.token, tc.query, tc.lastEventID)
			if res == nil {
				t.Fatalf("stream opened, want %d", tc.status)
			}
			p := apitest.AssertProblem(t, res, tc.status)
			if tc.param != "" && !strings.Contains(fmt.Sprint(p["detail"]), tc.param) {
				t.Errorf("detail %q does not name %s", p["detail"], tc.param)
			}
		})
	}
	// HEAD answers the headers and ends.
	req, _ := http.NewRequest(http.MethodHead, e.URL+"/api/messages/stream", nil)
	req.Header.Set("Authorization", "Bearer "+ada)
	head, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	head.Body.Close()
	if head.StatusCode != http.StatusOK || head.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("HEAD = %d %q", head.StatusCode, head.Header.Get("Content-Type"))
	}
	// GET /api/messages/{id} still serves messages beside the stream.
	m := e.Post(ada, "beside the stream")
	if res := e.Do(apitest.Request{Method: http.MethodGet, Path: fmt.Sprintf("/api/messages/%d", int(m["id"].(float64))), Token: ada}); res.Status != http.StatusOK {
		t.Errorf("GET message = %d", res.Status)
	}
}

// TestStreamResume: a client that reconnects with the id of the last event
// it saw gets exactly the events it missed, then the live ones, whether it
// sends the header or the parameter; the header wins over the parameter.
func TestStreamResume(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	st := openStream(e, ada, "", "")
	e.Post(ada, "one")
	e.Post(ada, "two")
	seen := st.next()
	st.close()
	e.Post(ada, "three")
	m := e.Post(ada, "four")
	e.Remove(ada, m["id"].(float64))

	// Four was deleted before the stream resumed: only its deletion comes.
	want := []string{"created #2 two", "created #3 three", "deleted #4"}
	for _, how := range []struct{ name, header, query string }{
		{"by header", seen.ID, ""},
		{"by parameter", "", "lastEventId=" + seen.ID},
		{"header over parameter", seen.ID, "lastEventId=4"},
	} {
		t.Run(how.name, func(t *testing.T) {
			re := openStream(e, ada, how.query, how.header)
			re.t = t
			t.Cleanup(re.close)
			if got := re.nextSummaries(t, len(want)); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("resumed with %q, want %q", got, want)
			}
			re.expectQuiet(50 * time.Millisecond)
			re.close()
		})
	}
	// And resuming at the head is simply live.
	re := openStream(e, ada, "", "5")
	e.Post(ada, "five")
	if got := re.next().summary(t); got != "created #5 five" {
		t.Errorf("live after resuming at the head: %q", got)
	}
}

// TestStreamResumeBeforeAnyEvent: the opening block carries the position
// the stream starts from, so a client dropped before its first event
// resumes from there and misses nothing; a resuming stream's opening block
// carries no id, since the client already holds its position.
func TestStreamResumeBeforeAnyEvent(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	e.Post(ada, "before")
	st := openStream(e, ada, "", "")
	opening := <-st.events
	if opening.ID != "1" || opening.Retry == "" {
		t.Fatalf("opening block %+v, want id 1 (the head) and a retry hint", opening)
	}
	st.close()
	e.Post(ada, "while away")
	re := openStream(e, ada, "", opening.ID)
	if opening := <-re.events; opening.ID != "" {
		t.Errorf("a resuming stream's opening block has id %q", opening.ID)
	}
	if got := re.next().summary(t); got != "created #2 while away" {
		t.Errorf("resumed from the opening id: %q", got)
	}
}

// TestStreamResumeAcrossRestart: the change log is on disk, so a stream
// resumes after the server restarts with nothing lost or repeated.
func TestStreamResumeAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herald.db")
	start := func() (*apitest.Env, func()) {
		return apitest.Serve(t, apitest.OpenStore(t, path, nil), heraldhttp.Config{}, nil)
	}
	e, stop := start()
	ada := e.Register("ada@example.com", "correct horse battery")
	st := openStream(e, ada, "", "")
	e.Post(ada, "before the restart")
	seen := st.next()
	e.Post(ada, "missed before the restart")
	stop()

	e, _ = start()
	e.Post(ada, "made after the restart")
	re := openStream(e, ada, "", seen.ID)
	want := []string{"created #2 missed before the restart", "created #3 made after the restart"}
	if got := re.nextSummaries(t, 2); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("resumed across a restart with %q, want %q", got, want)
	}
	re.expectQuiet(50 * time.Millisecond)
	e.Post(ada, "live after the restart")
	if got := re.next().summary(t); got != "created #4 live after the restart" {
		t.Errorf("then live: %q", got)
	}
}

// TestStreamReset: a position the change log no longer holds, or never
// held, gets a reset event (with the id to go on from), then live events.
func TestStreamReset(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	for i := range 10 {
		e.Post(ada, fmt.Sprintf("post %d", i))
	}
	if n, err := e.DB.TrimChanges(context.Background(), 0, 3); err != nil || n != 7 {
		t.Fatalf("TrimChanges = %d, %v", n, err)
	}
	for _, from := range []string{"2", "99"} {
		head, _, _ := e.DB.ChangeHead(context.Background())
		st := openStream(e, ada, "", from)
		ev := st.next()
		if ev.Event != "reset" || ev.ID != strconv.FormatUint(head, 10) {
			t.Errorf("resume from %s: %+v, want a reset with id %d", from, ev, head)
		}
		e.Post(ada, "after the reset "+from)
		if got := st.next(); got.Event != "message.created" || !strings.Contains(got.Data, "after the reset "+from) {
			t.Errorf("after the reset: %+v", got)
		}
		st.close()
	}
	// Positions still held resume normally.
	st := openStream(e, ada, "", "8")
	if got := st.nextSummaries(t, 2); got[0] != "created #9 post 8" {
		t.Errorf("resume from a kept position: %q", got)
	}
}

// TestStreamResetFollowsTheLog: a stream resumes only from what the change
// log holds, even when the hub still has the trimmed changes rendered for
// the streams it serves. Instances that rendered different spans of the
// log must answer one position alike, and a restart must not change the
// answer.
func TestStreamResetFollowsTheLog(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	watcher := openStream(e, ada, "", "")
	for i := range 10 {
		e.Post(ada, fmt.Sprintf("post %d", i))
	}
	watcher.nextSummaries(t, 10) // the hub has rendered all ten
	if n, err := e.DB.TrimChanges(context.Background(), 0, 3); err != nil || n != 7 {
		t.Fatalf("TrimChanges = %d, %v", n, err)
	}
	head, _, _ := e.DB.ChangeHead(context.Background())
	st := openStream(e, ada, "", "2")
	if ev := st.next(); ev.Event != "reset" || ev.ID != strconv.FormatUint(head, 10) {
		t.Errorf("resume from a trimmed position: %+v, want a reset with id %d", ev, head)
	}
	st.close()
	st = openStream(e, ada, "", "7") // the oldest position the log resumes after
	if got := st.nextSummaries(t, 3); got[0] != "created #8 post 7" {
		t.Errorf("resume from the oldest kept position: %q", got)
	}
}

// TestStreamResumeAfterAnAccountIsDeleted: a stream resuming from before
// an account was deleted gets none of what the account posted or edited,
// only the deletions of its messages, while everyone else's changes come
// as they happened. A stream that was live meanwhile saw them then.
func TestStreamResumeAfterAnAccountIsDeleted(t *testing.T) {
	e := apitest.New(t)
	const password = "correct horse battery"
	ada := e.Register("ada@example.com", password)
	bob := e.Register("bob@example.com", password)
	opening := openStream(e, ada, "", "")
	var from string
	for from == "" {
		from = (<-opening.events).ID
	}
	opening.close()
	live := openStream(e, ada, "", "")

	// Each change reaches the live stream before the next is made: one
	// rendered only after the next edit of its message shows the message
	// as that edit left it.
	secret := e.Post(bob, "bob's first secret")
	seen := live.nextSummaries(t, 1)
	e.Patch(bob, secret["id"].(float64), "bob's edited secret")
	seen = append(seen, live.nextSummaries(t, 1)...)
	kept := e.Post(ada, "ada stays")
	if res := e.Do(apitest.Request{Method: http.MethodDelete, Path: "/api/me", Token: bob, ContentType: "application/json",
		Body: apitest.JSONBody(t, map[string]string{"password": password})}); res.Status != http.StatusNoContent {
		t.Fatalf("delete bob's account: %d %s", res.Status, res.Body)
	}
	secretID, keptID := int(secret["id"].(float64)), int(kept["id"].(float64))
	want := []string{
		fmt.Sprintf("created #%d ada stays", keptID),
		fmt.Sprintf("deleted #%d", secretID),
	}
	resumed := openStream(e, ada, "", from)
	if got := resumed.nextSummaries(t, len(want)); !slices.Equal(got, want) {
		t.Errorf("resumed from %s after bob's account went: %q, want %q", from, got, want)
	}
	resumed.expectQuiet(100 * time.Millisecond)
	if got := append(seen, live.nextSummaries(t, 2)...); got[0] != fmt.Sprintf("created #%d bob's first secret", secretID) ||
		got[1] != fmt.Sprintf("updated #%d bob's edited secret", secretID) {
		t.Errorf("the live stream got %q, want bob's message as it happened", got)
	}
}

// TestStreamEndsWithItsToken: logging out, revoking the device, signing
// out everywhere, a password change elsewhere and deleting the account end
// the streams of the tokens they revoke at once — the periodic check is an
// hour here, so only the wake-up each token deletion sends can end them —
// while other streams go on. A deleted account's messages are announced as
// deleted.
func TestStreamEndsWithItsToken(t *testing.T) {
	e := apitest.New(t, apitest.WithStreams(stream.Limits{TokenCheck: time.Hour}))
	const password = "correct horse battery"
	root := e.Admin("root@example.com")
	e.Register("ada@example.com", password)
	adaID := e.AccountID(root, "ada@example.com")
	bob := e.Register("bob@example.com", password)
	watcher := openStream(e, bob, "", "")

	expect204 := func(what string, res *apitest.Response) {
		t.Helper()
		if res.Status != http.StatusNoContent {
			t.Fatalf("%s: %d %s", what, res.Status, res.Body)
		}
	}
	for _, tc := range []struct {
		name string
		end  func(token, other string)
	}{
		{"logout", func(token, _ string) {
			expect204("logout", e.Do(apitest.Request{Method: http.MethodPost, Path: "/api/logout", Token: token}))
		}},
		{"revoke this device", func(token, other string) {
			var list struct {
				Items []struct {
					ID      string
					Current bool
				}
			}
			if err := json.Unmarshal(e.Do(apitest.Request{Method: http.MethodGet, Path: "/api/me/tokens", Token: token}).Body, &list); err != nil {
				t.Fatal(err)
			}
			for _, it := range list.Items {
				if it.Current {
					expect204("revoke", e.Do(apitest.Request{Method: http.MethodDelete, Path: "/api/me/tokens/" + it.ID, Token: other}))
				}
			}
		}},
		{"sign out everywhere", func(_, other string) {
			expect204("revoke all", e.Do(apitest.Request{Method: http.MethodDelete, Path: "/api/me/tokens", Token: other}))
		}},
		{"password changed elsewhere", func(_, other string) {
			expect204("password", e.Do(apitest.Request{Method: http.MethodPost, Path: "/api/me/password", Token: other, ContentType: "application/json",
				Body: apitest.JSONBody(t, map[string]string{"currentPassword": password, "newPassword": password + "!"})}))
			expect204("password back", e.Do(apitest.Request{Method: http.MethodPost, Path: "/api/me/password", Token: other, ContentType: "application/json",
				Body: apitest.JSONBody(t, map[string]string{"currentPassword": password + "!", "newPassword": password})}))
		}},
		{"suspended by an administrator", func(_, _ string) {
			for _, suspended := range []string{`{"suspended":true}`, `{"suspended":false}`} {
				res := e.Do(apitest.Request{Method: http.MethodPatch, Path: "/api/admin/users/" + adaID, Token: root, ContentType: "application/merge-patch+json", Body: suspended})
				if res.Status != http.StatusOK {
					t.Fatalf("%s: %d %s", suspended, res.Status, res.Body)
				}
			}
		}},
		{"a password reset", func(_, _ string) {
			res := e.Do(apitest.Request{Method: http.MethodPost, Path: "/api/admin/users/" + adaID + "/password-reset", Token: root})
			code, _ := res.JSON(t)["code"].(string)
			expect204("reset", e.Do(apitest.Request{Method: http.MethodPost, Path: "/api/password-reset", ContentType: "application/json",
				Body: apitest.JSONBody(t, map[string]string{"code": code, "newPassword": password})}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			token := e.Login("ada@example.com", password)
			other := e.Login("ada@example.com", password)
			st := openStream(e, token, "", "")
			tc.end(token, other)
			st.expectEnd(3 * time.Second)
		})
	}
	ada := e.Login("ada@example.com", password)
	m := e.Post(ada, "ada's last words")
	if got := watcher.next().summary(t); got != fmt.Sprintf("created #%d ada's last words", int(m["id"].(float64))) {
		t.Fatalf("watcher got %q", got)
	}
	st := openStream(e, ada, "", "")
	expect204("delete account", e.Do(apitest.Request{Method: http.MethodDelete, Path: "/api/me", Token: ada, ContentType: "application/json", Body: apitest.JSONBody(t, map[string]string{"password": password})}))
	st.expectEnd(3 * time.Second)
	if got := watcher.next().summary(t); got != fmt.Sprintf("deleted #%d", int(m["id"].(float64))) {
		t.Errorf("after ada's account went, the watcher got %q", got)
	}

	// An administrator removing an account's messages: the watcher hears
	// of each; removing the account: its stream ends.
	carol := e.Register("carol@example.com", password)
	carolID := e.AccountID(root, "carol@example.com")
	first, second := e.Post(carol, "spam one"), e.Post(carol, "spam two")
	watcher.next()
	watcher.next()
	expect204("remove messages", e.Do(apitest.Request{Method: http.MethodDelete, Path: "/api/admin/users/" + carolID + "/messages", Token: root}))
	for _, want := range []map[string]any{second, first} { // newest first
		if got := watcher.next().summary(t); got != fmt.Sprintf("deleted #%d", int(want["id"].(float64))) {
			t.Errorf("after an administrator removed carol's messages, the watcher got %q", got)
		}
	}
	st = openStream(e, carol, "", "")
	expect204("remove account", e.Do(apitest.Request{Method: http.MethodDelete, Path: "/api/admin/users/" + carolID, Token: root}))
	st.expectEnd(3 * time.Second)
}

// TestStreamEndsWhenItsTokenExpires: the store's clock passing the token's
// expiry ends the stream at the next check.
func TestStreamEndsWhenItsTokenExpires(t *testing.T) {
	e := apitest.New(t, apitest.WithStreams(stream.Limits{TokenCheck: 50 * time.Millisecond}), apitest.WithTokenTTL(time.Hour))
	ada := e.Register("ada@example.com", "correct horse battery")
	st := openStream(e, ada, "", "")
	st.expectQuiet(150 * time.Millisecond) // checks pass while the token is good
	e.Clock.Advance(time.Hour)
	st.expectEnd(3 * time.Second)
}

// TestStreamLimits: beyond the per-account and total caps, 429 with
// Retry-After; closing a stream frees its place.
func TestStreamLimits(t *testing.T) {
	e := apitest.New(t, apitest.WithStreams(stream.Limits{PerUser: 2, Total: 3}))
	ada := e.Register("ada@example.com", "correct horse battery")
	bob := e.Register("bob@example.com", "correct horse battery")
	a1 := openStream(e, ada, "", "")
	openStream(e, ada, "", "")
	res, _ := tryStream(e, ada, "", "")
	if res == nil || res.Status != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Fatalf("third stream of one account: %+v, want 429 with Retry-After", res)
	}
	openStream(e, bob, "", "")
	if res, _ := tryStream(e, bob, "", ""); res == nil || res.Status != http.StatusTooManyRequests {
		t.Fatalf("fourth stream in all: %+v, want 429", res)
	}
	a1.close()
	// The server notices the closed stream when its connection ends.
	deadline := time.Now().Add(3 * time.Second)
	for {
		res, st := tryStream(e, bob, "", "")
		if st != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed stream's place was not freed: %d", res.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStreamShutdown: CloseStreams ends every stream with a retry hint, and
// refuses new ones with 503.
func TestStreamShutdown(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	st := openStream(e, ada, "", "")
	<-st.events // the opening block
	e.Server.CloseStreams()
	st.expectEnd(3 * time.Second)
	var last sseEvent
	for len(st.events) > 0 {
		last = <-st.events
	}
	if last.Retry == "" {
		t.Errorf("last block before the end = %+v, want a retry hint", last)
	}
	res, _ := tryStream(e, ada, "", "")
	if res == nil || res.Status != http.StatusServiceUnavailable {
		t.Errorf("stream during shutdown: %+v, want 503", res)
	}
}

// TestStreamEndIsLogged: a stream's access-log line is written once it
// has caught up, so its end gets a line of its own, saying whose stream it was and
// why it ended, and nothing secret.
func TestStreamEndIsLogged(t *testing.T) {
	e := apitest.New(t, apitest.WithStreams(stream.Limits{TokenCheck: time.Hour}))
	ada := e.Register("ada@example.com", "correct horse battery")
	id := int(e.Do(apitest.Request{Method: http.MethodGet, Path: "/api/me", Token: ada}).JSON(t)["id"].(float64))
	user := fmt.Sprintf("user=%d ", id)

	// waitForEnd waits for the n-th "stream ended" line and returns it.
	waitForEnd := func(n int) string {
		t.Helper()
		deadline := time.Now().Add(3 * time.Second)
		for {
			var ends []string
			for line := range strings.Lines(e.Logs.String()) {
				if strings.Contains(line, `msg="stream ended"`) {
					ends = append(ends, line)
				}
			}
			if len(ends) >= n {
				return ends[n-1]
			}
			if time.Now().After(deadline) {
				t.Fatalf("no log line for stream end %d in:\n%s", n, e.Logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	expect := func(line, reason string) {
		t.Helper()
		for _, want := range []string{user, `reason="` + reason + `"`, "duration=", "remote=127.0.0.1:"} {
			if !strings.Contains(line, want) {
				t.Errorf("log line %q lacks %q", line, want)
			}
		}
		if strings.Contains(line, ada) {
			t.Errorf("log line %q holds the token", line)
		}
	}

	st := openStream(e, ada, "", "")
	<-st.events
	st.close()
	expect(waitForEnd(1), "the client closed the connection")

	other := e.Login("ada@example.com", "correct horse battery")
	st = openStream(e, other, "", "")
	<-st.events
	if res := e.Do(apitest.Request{Method: http.MethodPost, Path: "/api/logout", Token: other}); res.Status != http.StatusNoContent {
		t.Fatalf("logout: %d %s", res.Status, res.Body)
	}
	st.expectEnd(3 * time.Second)
	expect(waitForEnd(2), "its token expired or no longer works")

	st = openStream(e, ada, "", "")
	<-st.events
	e.Server.CloseStreams()
	st.expectEnd(3 * time.Second)
	expect(waitForEnd(3), "the server is shutting down")
	time.Sleep(50 * time.Millisecond) // room for a line too many, were there one
	if n := strings.Count(e.Logs.String(), `msg="stream ended"`); n != 3 {
		t.Errorf("%d stream ended lines for 3 streams:\n%s", n, e.Logs.String())
	}
}

// TestStreamHeartbeat: an idle stream gets comment lines, as often as its
// response header says.
func TestStreamHeartbeat(t *testing.T) {
	e := apitest.New(t, apitest.WithStreams(stream.Limits{Heartbeat: 30 * time.Millisecond}))
	ada := e.Register("ada@example.com", "correct horse battery")
	st := openStream(e, ada, "", "")
	if got := st.resp.Header.Get("Herald-Stream-Heartbeat"); got != "30" {
		t.Errorf("Herald-Stream-Heartbeat = %q, want the interval in milliseconds, 30", got)
	}
	<-st.events
	select {
	case ev := <-st.events:
		if ev.Event != "" || len(ev.Comments) == 0 {
			t.Errorf("idle stream sent %+v, want a comment", ev)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("no heartbeat")
	}
}

// TestStreamOutlivesServerTimeouts: the server's read and write timeouts
// bound ordinary requests, not streams.
func TestStreamOutlivesServerTimeouts(t *testing.T) {
	e, _ := apitest.Serve(t, apitest.OpenStore(t, filepath.Join(t.TempDir(), "herald.db"), nil), heraldhttp.Config{}, func(srv *http.Server) {
		srv.ReadTimeout, srv.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond
	})
	ada := e.Register("ada@example.com", "correct horse battery")
	st := openStream(e, ada, "", "")
	time.Sleep(600 * time.Millisecond)
	e.Post(ada, "still there?")
	if got := st.next().summary(t); got != "created #1 still there?" {
		t.Errorf("after the server's timeouts passed: %q", got)
	}
}

// TestStreamSlowConsumer: a client that stops reading is disconnected,
// while another stream of the same changes keeps up with every event.
func TestStreamSlowConsumer(t *testing.T) {
	limits := stream.Limits{MaxLag: 8, WriteTimeout: 300 * time.Millisecond}
	// Small send buffers on the server's side, so a client that stops
	// reading blocks the server's writes after kilobytes, not megabytes.
	e, _ := apitest.Serve(t, apitest.OpenStore(t, filepath.Join(t.TempDir(), "herald.db"), nil), heraldhttp.Config{Streams: limits}, func(srv *http.Server) {
		srv.ConnState = func(c net.Conn, state http.ConnState) {
			if under, ok := c.(interface{ NetConn() net.Conn }); ok {
				c = under.NetConn()
			}
			if state != http.StateNew {
				return
			}
			tcp, ok := c.(*net.TCPConn)
			if !ok {
				t.Errorf("connection is a %T: cannot shrink its send buffer", c)
				return
			}
			_ = tcp.SetWriteBuffer(8192)
		}
	})
	ada := e.Register("ada@example.com", "correct horse battery")
	fast := openStream(e, ada, "", "")

	// The slow client: a raw connection with a small receive buffer that
	// reads nothing after the request.
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conn, err := dialer.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /api/messages/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", ada)

	// Each post waits until the fast stream has its event: the fast one is
	// never behind by more than one change, however quick the posts are
	// (posting all first let a fast reader on a fast machine fall MaxLag
	// behind while a large write was in flight), and the slow one falls
	// further behind with every post until it is cut.
	big := strings.Repeat("slow consumers fall behind ", 360) // ~10 KB
	const n = 100
	for i := range n {
		e.Post(ada, fmt.Sprintf("%d %s", i, big))
		ev := fast.next()
		if want := strconv.Itoa(i + 1); ev.ID != want {
			t.Fatalf("fast stream: event %s, want %s", ev.ID, want)
		}
	}
	// The slow one was cut off: reading what it was sent ends in EOF.
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.Copy(io.Discard, conn)
	if err != nil {
		t.Fatalf("slow stream: read %d bytes, then %v; want the server to close it", got, err)
	}
	if got >= int64(n*len(big)) {
		t.Errorf("slow stream received %d bytes, everything: it was never behind", got)
	}
}

// TestStreamClientThatTalks: SSE clients send nothing after their request;
// one that keeps sending is cut off rather than read forever.
func TestStreamClientThatTalks(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /api/messages/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", ada)
	br := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("status line %q, %v", line, err)
	}
	// A little is tolerated: the stream still delivers.
	if _, err := conn.Write([]byte("hello?\r\n")); err != nil {
		t.Fatal(err)
	}
	e.Post(ada, "still listening")
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before the event: %v", err)
		}
		if strings.Contains(line, "still listening") {
			break
		}
	}
	// A lot is not: the server closes the connection (a reset, since it
	// leaves what was sent unread).
	go func() { _, _ = conn.Write(make([]byte, 64<<10)) }()
	if _, err := io.Copy(io.Discard, br); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reading until the server closes: %v", err)
	}
}

// postLargeMessages registers n accounts named prefix0@example.com... and
// has each post 60 messages of model.MaxContentChars control characters
// (about 60 KB of JSON each), straight into the store; it returns their
// tokens.
func postLargeMessages(t *testing.T, e *apitest.Env, prefix string, n int) []string {
	t.Helper()
	ctx := context.Background()
	content := strings.Repeat("\x01", model.MaxContentChars)
	var tokens []string
	for i := range n {
		token := e.Register(fmt.Sprintf("%s%d@example.com", prefix, i), "correct horse battery")
		tokens = append(tokens, token)
		u, _, err := e.DB.Authenticate(ctx, auth.HashToken(token))
		if err != nil {
			t.Fatal(err)
		}
		for range 60 {
			if _, err := e.DB.CreateMessage(ctx, model.ByUser(u.ID), content); err != nil {
				t.Fatal(err)
			}
		}
	}
	return tokens
}

// requestStream sends, on c, a stream request with token resuming after
// lastEventID.
func requestStream(c net.Conn, host, token, lastEventID string) {
	fmt.Fprintf(c, "GET /api/messages/stream HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nLast-Event-ID: %s\r\n\r\n", host, token, lastEventID)
}

// stallStreams opens 16 streams with each of tokens, resuming after
// lastEventID, on connections that never read (their receive buffers
// small, as a client that stops reading at once), closed when t ends.
func stallStreams(t *testing.T, host string, tokens []string, lastEventID string) []net.Conn {
	t.Helper()
	var stalled []net.Conn
	t.Cleanup(func() {
		for _, c := range stalled {
			c.Close()
		}
	})
	for _, token := range tokens {
		for range 16 {
			c, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			stalled = append(stalled, c)
			_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
			requestStream(c, host, token, lastEventID)
		}
	}
	return stalled
}

// TestStreamCatchUpMemoryBounded is the attack of an outside test run:
// five accounts post 60 messages each of 10,000 control characters (each
// renders to about 60 KB of JSON), then open 16 streams each resuming
// from before them, on connections that never read. The streams hold the
// hub's bounded memory, and no more, however many they are (hubMemory,
// replays and the budget of writes in flight: about 28 MiB, with what the
// runtime holds around them: the connections' buffers, the store's reads
// in flight, garbage the sampler's collections have not yet reached),
// rather than a batch rendered and copied for each of them, which grows
// by gigabytes; and once the clients are gone, so is what they held. A
// client that reads, resuming from the same place meanwhile, gets every
// message.
func TestStreamCatchUpMemoryBounded(t *testing.T) {
	e := apitest.New(t, apitest.WithStreams(stream.Limits{WriteTimeout: 3 * time.Second}))
	ctx := context.Background()
	from, _, err := e.DB.ChangeHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tokens := postLargeMessages(t, e, "attacker", 5)
	host := strings.TrimPrefix(e.URL, "http://")
	last := strconv.FormatUint(from, 10)

	var base runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	stalled := stallStreams(t, host, tokens, last)
	// The reader counts the events it reads and keeps none: what it read
	// is the test's memory, not the server's.
	readerConn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer readerConn.Close()
	requestStream(readerConn, host, e.Register("reader@example.com", "correct horse battery"), last)
	created := make(chan int, 1)
	go func() {
		lines := bufio.NewScanner(readerConn)
		lines.Buffer(make([]byte, 0, 64<<10), 256<<10)
		n := 0
		for lines.Scan() && n < 300 {
			if lines.Text() == "event: message.created" {
				n++
			}
		}
		created <- n
	}()

	// The heap held after each collection, at its highest, while the
	// stalled streams catch up and the reader reads.
	peak := make(chan uint64)
	stop := make(chan struct{})
	go func() {
		var most uint64
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				peak <- most
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.GC()
			runtime.ReadMemStats(&m)
			most = max(most, m.HeapAlloc)
		}
	}()
	_ = readerConn.SetReadDeadline(time.Now().Add(60 * time.Second))
	if got := <-created; got < 300 {
		t.Fatalf("the reading client got %d of the 300 messages", got)
	}
	time.Sleep(time.Second) // the stalled streams go on holding what they hold
	close(stop)
	grew := int64(<-peak) - int64(base.HeapAlloc)
	// The budgets and what surrounds them, with room for a collection
	// that comes late: an unbounded catch-up is a hundred times this.
	const bound = 96 << 20
	t.Logf("80 stalled streams and a reader resuming before 300 messages of 60 KB: the heap grew by %.1f MiB at most", float64(grew)/(1<<20))
	if grew > bound {
		t.Errorf("the heap grew by %d MiB while streams caught up, want at most %d MiB", grew>>20, bound>>20)
	}

	// Gone, the clients hold nothing.
	for _, c := range stalled {
		c.Close()
	}
	readerConn.Close()
	var after runtime.MemStats
	deadline := time.Now().Add(30 * time.Second)
	for {
		runtime.GC()
		runtime.ReadMemStats(&after)
		if int64(after.HeapAlloc)-int64(base.HeapAlloc) < 24<<20 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if left := int64(after.HeapAlloc) - int64(base.HeapAlloc); left >= 24<<20 {
		t.Errorf("%d MiB still held after the clients left, want less than the hub's own memory", left>>20)
	}
}

// TestStreamResumeReplaysAsNow: a stream resuming from before a message
// was edited, deleted by its owner, removed by an administrator, or
// removed with all of its owner's messages replays each message as it is
// now: an edited one with its final words at its creation and each
// update, and of one gone only its deletion; nothing edited away or
// deleted is sent again. So whether the hub still holds the changes as it
// rendered them for a stream that watched them happen, or reads them from
// the log after a restart.
func TestStreamResumeReplaysAsNow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herald.db")
	e, stop := apitest.Serve(t, apitest.OpenStore(t, path, nil), heraldhttp.Config{}, nil)
	const password = "correct horse battery"
	root := e.Admin("root@example.com")
	ada := e.Register("ada@example.com", password)
	bob := e.Register("bob@example.com", password)
	opening := openStream(e, ada, "", "")
	var from string
	for from == "" {
		from = (<-opening.events).ID
	}
	opening.close()
	watcher := openStream(e, root, "", "")

	edited := id(e.Post(ada, "first draft alpha"))
	e.Patch(ada, edited, "second draft bravo")
	e.Patch(ada, edited, "final words charlie")
	regretted := id(e.Post(ada, "regretted delta"))
	e.Remove(ada, regretted)
	abusive := id(e.Post(bob, "abusive echo"))
	e.Remove(root, abusive)
	spam := id(e.Post(bob, "spam foxtrot"))
	kept := id(e.Post(ada, "kept golf"))
	bobID := int(e.Do(apitest.Request{Method: http.MethodGet, Path: "/api/me", Token: bob}).JSON(t)["id"].(float64))
	if res := e.Do(apitest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/admin/users/%d/messages", bobID), Token: root}); res.Status != http.StatusNoContent {
		t.Fatalf("remove bob's messages: %d %s", res.Status, res.Body)
	}
	want := []string{
		fmt.Sprintf("created #%d final words charlie", int(edited)),
		fmt.Sprintf("updated #%d final words charlie", int(edited)),
		fmt.Sprintf("updated #%d final words charlie", int(edited)),
		fmt.Sprintf("deleted #%d", int(regretted)),
		fmt.Sprintf("deleted #%d", int(abusive)),
		fmt.Sprintf("created #%d kept golf", int(kept)),
		fmt.Sprintf("deleted #%d", int(spam)),
	}
	watched := watcher.nextSummaries(t, 10) // the hub rendered every change as it happened
	if watched[0] != fmt.Sprintf("created #%d first draft alpha", int(edited)) {
		t.Fatalf("the watching stream got %q first, want the message as it was created", watched[0])
	}
	resume := func(e *apitest.Env, how string) {
		t.Helper()
		st := openStream(e, ada, "", from)
		if got := st.nextSummaries(t, len(want)); !slices.Equal(got, want) {
			t.Errorf("%s: resumed with\n%q\nwant\n%q", how, got, want)
		}
		st.expectQuiet(100 * time.Millisecond)
		st.close()
	}
	resume(e, "from the hub's window")
	stop()
	e, _ = apitest.Serve(t, apitest.OpenStore(t, path, nil), heraldhttp.Config{}, nil)
	resume(e, "from the log, after a restart")
}

// id is the ID in a message's JSON.
func id(m map[string]any) float64 { return m["id"].(float64) }

// TestStreamCatchUpsLeaveLiveStreamsAlone: 48 streams of three accounts
// that resume from before 180 large messages and never read hold all the
// memory the hub lets catch-ups hold, and more wait for it; a live stream
// of another account is not held up by them: its own change reaches it
// long before the stalled streams' writes time out (a minute here).
func TestStreamCatchUpsLeaveLiveStreamsAlone(t *testing.T) {
	e := apitest.New(t, apitest.WithStreams(stream.Limits{WriteTimeout: time.Minute}))
	ctx := context.Background()
	bystander := e.Register("bystander@example.com", "correct horse battery")
	from, _, err := e.DB.ChangeHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tokens := postLargeMessages(t, e, "stalled", 3)
	live := openStream(e, bystander, "", "")
	<-live.events // the opening block: the stream is live
	host := strings.TrimPrefix(e.URL, "http://")
	stallStreams(t, host, tokens, strconv.FormatUint(from, 10))
	// The stalled streams' catch-ups have taken what they may, and their
	// writes wait on clients that do not read.
	time.Sleep(time.Second)
	e.Post(bystander, "the bystander's own message")
	if ev, ok := live.tryNext(30 * time.Second); !ok || ev.Event != "message.created" || !strings.Contains(ev.Data, "the bystander's own message") {
		t.Fatalf("the live stream got %+v (ok %v) while stalled catch-ups held the budget; want its own message", ev, ok)
	}
}
