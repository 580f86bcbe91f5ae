package stream

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/auth"
	"herald/bolt"
	"herald/model"
)

// TestRoundGap: the gap between rounds grows with the writes a round made
// and, past the busy rate, with the rate changes commit at, within its
// floor and cap.
func TestRoundGap(t *testing.T) {
	for _, tt := range []struct {
		writes int
		rate   float64
		want   time.Duration
	}{
		{0, 0, streamRoundGap},
		{1, 5000, streamRoundGap},
		{100, 100, streamRoundGap},           // 2.5 ms of writes: the floor
		{1000, 0, 25 * time.Millisecond},     // 25 µs a write
		{1000, 200, 25 * time.Millisecond},   // below the busy rate
		{1000, 400, 25 * time.Millisecond},   // at it
		{1000, 800, 50 * time.Millisecond},   // twice it: twice the gap
		{1000, 2000, 125 * time.Millisecond}, // five times
		{1000, 100000, streamRoundGapMax},    // capped
		{10000, 0, streamRoundGapMax},        // 250 ms of writes: the cap
		{4000, 0, 100 * time.Millisecond},    // in between
	} {
		if got := roundGap(tt.writes, tt.rate); got != tt.want {
			t.Errorf("roundGap(%d writes, %.0f/s) = %v, want %v", tt.writes, tt.rate, got, tt.want)
		}
	}
}

// TestStreamStartsBeforeItsStatus: a client that has the stream's 200 and
// then writes gets its own change, however soon after the status the
// change commits, because the stream's position is fixed before the status
// goes out. The hook commits the change in the narrowest gap there is:
// after the status, before the stream starts.
func TestStreamStartsBeforeItsStatus(t *testing.T) {
	db, hub := newTestHub(t)
	ada, token := testUser(t, db, "ada@example.com")
	srv := httptest.NewServer(testHandler(db, hub))
	t.Cleanup(srv.Close)
	hub.afterStatus = func() {
		if _, err := db.CreateMessage(context.Background(), model.ByUser(ada.ID), "right after the status"); err != nil {
			t.Errorf("post: %v", err)
		}
	}
	lines := openStream(t, srv.URL, token, 5*time.Second)
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "data: ") && strings.Contains(lines.Text(), "right after the status") {
			return
		}
	}
	t.Fatalf("the stream never sent the change committed right after its status (%v)", lines.Err())
}

// TestStreamFilterPasses: owner and q filter as search does; an update
// passes on its words before or after, a deletion on the words of what it
// took away, and either passes every filter by words when those are
// unknown (the log no longer held them); a change whose owner is unknown
// (a deletion of a purge an older release began) passes every owner; and
// a revocation, or a change of the settings, passes no filter.
func TestStreamFilterPasses(t *testing.T) {
	orphan := testChange(6, model.MessageDeleted, 15, "")
	orphan.Message.OwnerEmail = ""
	byBob := testChange(7, model.MessageCreated, 16, "apple juice")
	byBob.Message.OwnerEmail = "Bob@Example.com"
	evs := renderEvents([]*model.Change{
		testChange(1, model.MessageCreated, 10, "old words"),
		testChange(2, model.MessageUpdated, 10, "plain tea"), // before: "old words"
		testChange(3, model.MessageCreated, 11, "apple tart"),
		testChange(4, model.MessageDeleted, 11, ""),     // took away "apple tart"
		testChange(5, model.MessageUpdated, 12, "pear"), // before: unknown
		orphan,
		byBob,
		{Seq: 8, Kind: model.TokensRevoked, UserID: 1},
		testChange(9, model.MessageDeleted, 13, ""), // took away: unknown
		{Seq: 10, Kind: model.SettingsChanged},
	}, make(history))

	ada, bob := model.EmailKey("ADA@example.com"), model.EmailKey("bob@example.com")
	for _, tt := range []struct {
		name   string
		filter filter
		want   []uint64
	}{
		{"no filter", filter{}, []uint64{1, 2, 3, 4, 5, 6, 7, 9}},
		{"owner", filter{owner: ada}, []uint64{1, 2, 3, 4, 5, 6, 9}},
		{"other owner", filter{owner: bob}, []uint64{6, 7}},
		{"q", filter{terms: []string{"apple"}}, []uint64{3, 4, 5, 6, 7, 9}},
		{"q matching before the edit only", filter{terms: []string{"old"}}, []uint64{1, 2, 5, 6, 9}},
		{"q matching after the edit only", filter{terms: []string{"tea"}}, []uint64{2, 5, 6, 9}},
		{"q and owner", filter{terms: []string{"apple"}, owner: bob}, []uint64{6, 7}},
		{"q no change has", filter{terms: []string{"apple", "tea"}}, []uint64{5, 6, 9}},
	} {
		var got []uint64
		for _, ev := range evs {
			if tt.filter.passes(ev) {
				got = append(got, ev.seq)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: passes %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestStreamSendsAsNow: replayed, an event of a message changed since it
// was rendered goes out as the message is now: at its own position, with
// its own kind, and the newest event's message, under that message's
// words; an event of a message deleted since does not go out at all, and
// its deletion does, whatever the filter's words, since the client may
// hold any version of it.
func TestStreamSendsAsNow(t *testing.T) {
	changes := []*model.Change{
		testChange(1, model.MessageCreated, 10, "first draft"),
		testChange(2, model.MessageCreated, 11, "regretted words"),
		testChange(3, model.MessageUpdated, 10, "second draft"),
		testChange(4, model.MessageUpdated, 10, "final version"),
		testChange(5, model.MessageDeleted, 11, ""),
	}
	evs := renderEvents(changes, make(history))
	final := string(evs[3].text[evs[3].data:])
	for _, tt := range []struct {
		name   string
		filter filter
		want   string
	}{
		{"no filter", filter{}, "id: 1\nevent: message.created\ndata: " + final +
			"id: 3\nevent: message.updated\ndata: " + final + texts(evs[3], evs[4])},
		{"the words it has now", filter{terms: []string{"final"}}, "id: 1\nevent: message.created\ndata: " + final +
			"id: 3\nevent: message.updated\ndata: " + final + texts(evs[3], evs[4])},
		// The client may show the message as it was before 3; it is told.
		{"the words it had before an update", filter{terms: []string{"first"}}, "id: 3\nevent: message.updated\ndata: " + final + texts(evs[4])},
		{"the words of what was deleted", filter{terms: []string{"regretted"}}, texts(evs[4])},
		{"another owner", filter{owner: "bob@example.com"}, ""},
	} {
		out, _, n := tt.filter.gather(nil, evs, 1<<20, nil, evs[len(evs)-1].seq)
		if got := string(slices.Concat(out...)); got != tt.want || n != len(evs) {
			t.Errorf("%s: sent\n%s(through %d events), want\n%s", tt.name, got, n, tt.want)
		}
	}
	if !strings.Contains(final, `"final version"`) {
		t.Fatalf("the newest event's message is %q", final)
	}
}

// TestStreamPieces: events rendered together lie back to back in one
// block, so a round hands a stream a run of them as one piece; an event
// its filter drops, or a block boundary, starts a new piece; and the
// pieces carry exactly the texts, in order.
func TestStreamPieces(t *testing.T) {
	changes := []*model.Change{
		testChange(1, model.MessageCreated, 1, "apple one"),
		testChange(2, model.MessageUpdated, 2, "apple two"),
		testChange(3, model.MessageCreated, 3, "pear three"),
		testChange(4, model.MessageDeleted, 4, ""),
		testChange(5, model.MessageCreated, 5, "apple five"),
	}
	h := make(history)
	first, second := renderEvents(changes[:4], h), renderEvents(changes[4:], h)
	window := append(slices.Clip(first), second...)
	for i, ev := range window {
		// Sharing a block changes no event's text, and leaves no room to
		// append one text over the next.
		var data int
		if want := string(appendEventText(nil, changes[i], &data)); string(ev.text) != want || cap(ev.text) != len(ev.text) || ev.data != data {
			t.Errorf("event %d: text %q (cap %d), want %q", ev.seq, ev.text, cap(ev.text), want)
		}
	}
	everything := filter{}
	apples := filter{terms: []string{"apple"}}
	for _, tt := range []struct {
		name   string
		filter filter
		from   int // index of the first event the stream has not had
		pieces []string
	}{
		{"a run within a block is one piece", everything, 0, []string{texts(first...), texts(second...)}},
		{"from the middle of a block", everything, 2, []string{texts(first[2:]...), texts(second...)}},
		// The deletion's words are unknown: it passes.
		{"a dropped event splits the run", apples, 0, []string{texts(first[0], first[1]), texts(first[3]), texts(second...)}},
		{"one event", everything, 4, []string{texts(second...)}},
	} {
		out, _, _ := tt.filter.gather(nil, window[tt.from:], 1<<20, nil, 0)
		var got []string
		for _, p := range out {
			got = append(got, string(p))
		}
		if !slices.Equal(got, tt.pieces) {
			t.Errorf("%s: pieces %q, want %q", tt.name, got, tt.pieces)
		}
	}
}

// TestStreamBlocksBounded: a batch of large events is rendered into
// several blocks of at most about eventBlockBytes, since one event left in
// the window keeps its whole block; each block is still one piece.
func TestStreamBlocksBounded(t *testing.T) {
	big := strings.Repeat("word ", (eventBlockBytes/2-400)/5) // two fit in a block, not three
	var changes []*model.Change
	for seq := uint64(1); seq <= 5; seq++ {
		changes = append(changes, testChange(seq, model.MessageCreated, seq, big))
	}
	evs := renderEvents(changes, make(history))
	for i, ev := range evs {
		var data int
		if want := string(appendEventText(nil, changes[i], &data)); string(ev.text) != want {
			t.Fatalf("event %d: text differs from its own rendering", ev.seq)
		}
	}
	out, _, _ := (&filter{}).gather(nil, evs, 1<<20, nil, 0)
	var sizes []int
	for _, p := range out {
		sizes = append(sizes, len(p))
	}
	if len(out) != 3 || texts(evs...) != string(slices.Concat(out...)) {
		t.Errorf("five events of %d bytes went out in pieces of %v bytes, want three pieces (two, two, one) of the same bytes", len(evs[0].text), sizes)
	}
}

// TestRevocationsOfARound: a round learns which accounts lost tokens from
// the revocations among the changes it brings, and asks every stream to
// check its token when the window no longer holds them all.
func TestRevocationsOfARound(t *testing.T) {
	window := renderEvents([]*model.Change{
		testChange(5, model.MessageCreated, 5, "apple"),
		{Seq: 6, Kind: model.TokensRevoked, UserID: 7},
		testChange(7, model.MessageDeleted, 5, ""),
		{Seq: 8, Kind: model.TokensRevoked, UserID: 9},
	}, make(history))
	for _, tt := range []struct {
		since, head uint64
		want        []uint64
		all         bool
	}{
		{4, 8, []uint64{7, 9}, false},
		{6, 8, []uint64{9}, false},
		{5, 7, []uint64{7}, false},
		{8, 8, nil, false},
		{3, 8, nil, true}, // change 4 has left the window
	} {
		accounts, all := revocations(window, tt.since, tt.head)
		got := slices.Sorted(maps.Keys(accounts))
		if !slices.Equal(got, tt.want) || all != tt.all {
			t.Errorf("revocations after %d up to %d = %v, all %v; want %v, all %v", tt.since, tt.head, got, all, tt.want, tt.all)
		}
	}
}

// testChange is change seq of the log: kind, to message id of ada's with
// content (none, for a deletion).
func testChange(seq uint64, kind model.ChangeKind, id uint64, content string) *model.Change {
	at := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	return &model.Change{Seq: seq, Kind: kind, At: at, Message: model.Message{
		ID: id, OwnerID: 1, OwnerEmail: "ada@example.com", Content: content, CreatedAt: at, UpdatedAt: at, Revision: 1,
	}}
}

func texts(evs ...*event) string {
	var b []byte
	for _, ev := range evs {
		b = append(b, ev.text...)
	}
	return string(b)
}

// openStream opens a stream at url with the Authorization header value
// token, for at most d, and returns its lines; it is closed at cleanup.
func openStream(t *testing.T, url, token string, d time.Duration) *bufio.Scanner {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", token)
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stream.Body.Close() })
	return bufio.NewScanner(stream.Body)
}

// newTestHub opens a bbolt store in t.TempDir() and a hub over it.
func newTestHub(tb testing.TB) (*bolt.DB, *Hub) {
	tb.Helper()
	db := openTestDB(tb)
	return db, startTestHub(tb, db, db, Limits{}, nil)
}

// openTestDB opens a bbolt store in tb.TempDir(), closed at cleanup.
func openTestDB(tb testing.TB) *bolt.DB {
	tb.Helper()
	db, err := bolt.Open(filepath.Join(tb.TempDir(), "herald.db"), bolt.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("close db: %v", err)
		}
	})
	return db
}

// startTestHub starts a hub, closed at cleanup before the store it serves
// (cleanups run last first).
func startTestHub(tb testing.TB, feed Feed, tokens Tokens, limits Limits, log *slog.Logger) *Hub {
	tb.Helper()
	hub := New(feed, tokens, limits, time.Now, log)
	tb.Cleanup(hub.Close)
	return hub
}

// testUser creates an account on db with a token, and returns it with
// the token's Authorization header value.
func testUser(tb testing.TB, db *bolt.DB, email string) (*model.User, string) {
	tb.Helper()
	token, hash, err := auth.MintToken()
	if err != nil {
		tb.Fatal(err)
	}
	u := &model.User{Email: email, PasswordHash: "unused"}
	if _, err := db.CreateUser(context.Background(), u, hash, time.Hour, nil); err != nil {
		tb.Fatal(err)
	}
	return u, "Bearer " + token
}

// testHandler serves every request as an unfiltered stream of the caller
// whose token the Authorization header carries.
func testHandler(db *bolt.DB, hub *Hub) http.Handler {
	return resumingHandler(db, hub, Filter{}, nil)
}

// resumingHandler serves every request as a stream of the caller whose
// token the Authorization header carries, filtered by f, resuming after
// from (nil: from the newest change).
func resumingHandler(db *bolt.DB, hub *Hub, f Filter, from *uint64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		u, tok, err := db.Authenticate(r.Context(), auth.HashToken(token))
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if err := hub.Serve(w, r, Request{User: u, Token: tok, Filter: f, From: from}); err != nil {
			http.Error(w, err.Error(), http.StatusTooManyRequests)
		}
	})
}

// TestStreamLiveThroughBursts: a live stream that reads keeps up with
// bursts of the largest messages three accounts may post at once (their
// write bursts, 180 messages of 10,000 control characters, about 60 KB of
// JSON each), which outrun the hub's window of rendered events: it
// catches up from the log rather than being cut off, and gets every one.
func TestStreamLiveThroughBursts(t *testing.T) {
	db, hub := newTestHub(t)
	_, token := testUser(t, db, "reader@example.com")
	srv := httptest.NewServer(testHandler(db, hub))
	t.Cleanup(srv.Close)
	lines := openStream(t, srv.URL, token, time.Minute)
	for isLive := false; !isLive; time.Sleep(time.Millisecond) {
		hub.mu.Lock()
		isLive = len(hub.live) == 1
		hub.mu.Unlock()
	}
	content := strings.Repeat("\x01", model.MaxContentChars)
	for i := range 3 {
		poster, _ := testUser(t, db, fmt.Sprintf("poster%d@example.com", i))
		var wg sync.WaitGroup
		for range 60 {
			wg.Go(func() {
				if _, err := db.CreateMessage(context.Background(), model.ByUser(poster.ID), content); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	got := 0
	for got < 180 && lines.Scan() {
		if lines.Text() == "event: message.created" {
			got++
		}
	}
	if got < 180 {
		t.Fatalf("the reading stream got %d of 180 messages (%v)", got, lines.Err())
	}
}
