package stream

import (
	"bufio"
	"context"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
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

// TestStreamFilterPasses: owner and q filter as search does, an update
// passes on its words before or after, a change whose owner is unknown (a
// deletion of a purge an older release began) passes every owner, and a
// revocation passes no filter.
func TestStreamFilterPasses(t *testing.T) {
	created := testChange(1, model.MessageCreated, "apple pie")
	edited := testChange(2, model.MessageUpdated, "plain tea") // before: "old words"
	deleted := testChange(3, model.MessageDeleted, "apple tart")
	orphan := testChange(4, model.MessageDeleted, "apple crumble")
	orphan.Message.OwnerEmail = ""
	byBob := testChange(5, model.MessageCreated, "apple juice")
	byBob.Message.OwnerEmail = "Bob@Example.com"
	revoked := &model.Change{Seq: 6, Kind: model.TokensRevoked, UserID: 1}
	evs := renderEvents([]*model.Change{created, edited, deleted, orphan, byBob, revoked})

	ada, bob := model.EmailKey("ADA@example.com"), model.EmailKey("bob@example.com")
	for _, tt := range []struct {
		name   string
		filter filter
		want   []uint64
	}{
		{"no filter", filter{}, []uint64{1, 2, 3, 4, 5}},
		{"owner", filter{owner: ada}, []uint64{1, 2, 3, 4}},
		{"other owner", filter{owner: bob}, []uint64{4, 5}},
		{"q", filter{terms: []string{"apple"}}, []uint64{1, 3, 4, 5}},
		{"q matching before the edit only", filter{terms: []string{"old"}}, []uint64{2}},
		{"q matching after the edit only", filter{terms: []string{"tea"}}, []uint64{2}},
		{"q and owner", filter{terms: []string{"apple"}, owner: bob}, []uint64{4, 5}},
		{"q no change has", filter{terms: []string{"apple", "tea"}}, nil},
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

// TestStreamPieces: events rendered together lie back to back in one
// block, so a round hands a stream a run of them as one piece; an event
// its filter drops, or a block boundary, starts a new piece; and the
// pieces carry exactly the texts, in order.
func TestStreamPieces(t *testing.T) {
	changes := []*model.Change{
		testChange(1, model.MessageCreated, "apple one"),
		testChange(2, model.MessageUpdated, "apple two"),
		testChange(3, model.MessageCreated, "pear three"),
		testChange(4, model.MessageDeleted, "pear three"),
		testChange(5, model.MessageCreated, "apple five"),
	}
	first, second := renderEvents(changes[:4]), renderEvents(changes[4:])
	window := append(slices.Clip(first), second...)
	for i, ev := range window {
		// Sharing a block changes no event's text, and leaves no room to
		// append one text over the next.
		if want := string(appendEventText(nil, changes[i])); string(ev.text) != want || cap(ev.text) != len(ev.text) {
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
		{"a dropped event splits the run", apples, 0, []string{texts(first[0], first[1]), texts(second...)}},
		{"one event", everything, 4, []string{texts(second...)}},
	} {
		out := tt.filter.gather(nil, window[tt.from:])
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
		changes = append(changes, testChange(seq, model.MessageCreated, big))
	}
	evs := renderEvents(changes)
	for i, ev := range evs {
		if want := string(appendEventText(nil, changes[i])); string(ev.text) != want {
			t.Fatalf("event %d: text differs from its own rendering", ev.seq)
		}
	}
	out := (&filter{}).gather(nil, evs)
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
		testChange(5, model.MessageCreated, "apple"),
		{Seq: 6, Kind: model.TokensRevoked, UserID: 7},
		testChange(7, model.MessageDeleted, "apple"),
		{Seq: 8, Kind: model.TokensRevoked, UserID: 9},
	})
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

// testChange is change seq of the log: kind, to a message of ada's with
// content (replacing "old words", for an update).
func testChange(seq uint64, kind model.ChangeKind, content string) *model.Change {
	at := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	return &model.Change{Seq: seq, Kind: kind, At: at, Before: "old words", Message: model.Message{
		ID: seq, OwnerID: 1, OwnerEmail: "ada@example.com", Content: content, CreatedAt: at, UpdatedAt: at, Revision: 1,
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
