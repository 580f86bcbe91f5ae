package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// changeString renders what a reader of the log sees of a change.
func changeString(ch *model.Change) string {
	if ch.Kind == model.TokensRevoked {
		return fmt.Sprintf("%d %s of account %d", ch.Seq, ch.Kind, ch.UserID)
	}
	s := fmt.Sprintf("%d %s #%d %s %q", ch.Seq, ch.Kind, ch.Message.ID, ch.Message.OwnerEmail, ch.Message.Content)
	if ch.Scrubbed {
		s += " scrubbed"
	}
	if ch.Gone {
		s += " gone"
	}
	return s
}

func changeStrings(chs []*model.Change) []string {
	out := make([]string, len(chs))
	for i, ch := range chs {
		out[i] = changeString(ch)
	}
	return out
}

func mustChangesAfter(tb testing.TB, db *DB, after uint64) []string {
	tb.Helper()
	chs, _, err := db.ChangesAfter(context.Background(), after, 1000)
	if err != nil {
		tb.Fatalf("ChangesAfter(%d) = %v", after, err)
	}
	return changeStrings(chs)
}

func equalStrings(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }

// TestChangeLog: every committed write is logged once, in commit order,
// with what a filtering reader needs; a refused write logs nothing; the log
// reads the same from memory and, after a restart, from disk.
func TestChangeLog(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	bob, _ := mustCreateUser(t, db, "bob@example.com")

	if head, _, _ := db.ChangeHead(context.Background()); head != 0 {
		t.Fatalf("head of an empty log = %d, want 0", head)
	}
	m1 := mustCreateMessage(t, db, ada.ID, "hello world")
	m2 := mustCreateMessage(t, db, bob.ID, "bob here")
	if _, err := db.UpdateMessage(context.Background(), m1.ID, model.ByUser(ada.ID), model.MessageUpdate{Content: ptr("goodbye world")}, nil); err != nil {
		t.Fatal(err)
	}
	// Refused writes: not the owner, and an update that changes nothing.
	if _, err := db.DeleteMessage(context.Background(), m1.ID, model.ByUser(bob.ID), nil); !errors.Is(err, model.ErrForbidden) {
		t.Fatalf("DeleteMessage(not owner) = %v", err)
	}
	if _, err := db.UpdateMessage(context.Background(), m2.ID, model.ByUser(bob.ID), model.MessageUpdate{Content: ptr("bob here")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DeleteMessage(context.Background(), m2.ID, model.ByUser(bob.ID), nil); err != nil {
		t.Fatal(err)
	}
	// Each change shows the message as it is now, and a deletion no
	// content.
	want := []string{
		`1 message.created #1 ada@example.com "goodbye world" scrubbed`,
		`2 message.created #2 bob@example.com "" scrubbed gone`,
		`3 message.updated #1 ada@example.com "goodbye world"`,
		`4 message.deleted #2 bob@example.com ""`,
	}
	if got := mustChangesAfter(t, db.DB, 0); !equalStrings(got, want) {
		t.Fatalf("log from memory =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := mustChangesAfter(t, db.DB, 2); !equalStrings(got, want[2:]) {
		t.Errorf("log after 2 = %q, want %q", got, want[2:])
	}
	if got := mustChangesAfter(t, db.DB, 4); len(got) != 0 {
		t.Errorf("log after the head = %q, want nothing", got)
	}
	if _, _, err := db.ChangesAfter(context.Background(), 5, 10); !errors.Is(err, model.ErrChangeUnknown) {
		t.Errorf("ChangesAfter(beyond the head) = %v, want ErrChangeUnknown", err)
	}

	// After a restart the feed's memory is empty: the same log from disk.
	reopen(t, db)
	if head, _, _ := db.ChangeHead(context.Background()); head != 4 {
		t.Fatalf("head after reopen = %d, want 4", head)
	}
	if got := mustChangesAfter(t, db.DB, 0); !equalStrings(got, want) {
		t.Fatalf("log from disk =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// And the log goes on from where it was.
	mustCreateMessage(t, db, ada.ID, "after restart")
	if got := mustChangesAfter(t, db.DB, 4); len(got) != 1 || !strings.HasPrefix(got[0], "5 message.created #3") {
		t.Errorf("first change after restart = %q", got)
	}
}

// reopen closes db and opens its file again in place, with the options
// mustOpen gave it and the merge chunk a test set.
func reopen(t *testing.T, db *testDB) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ndb, err := Open(db.Path, Options{Now: db.Clock.Now, TailMergePostings: testMergePostings(), mergeChunk: db.merge.chunk})
	if err != nil {
		t.Fatal(err)
	}
	db.DB = ndb
}

// TestChangeHeadWakes: the channel ChangeHead returns is closed by the next
// commit that logs a change, and only then.
func TestChangeHeadWakes(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	head, wait, _ := db.ChangeHead(context.Background())
	select {
	case <-wait:
		t.Fatal("woken before any change")
	default:
	}
	mustCreateMessage(t, db, ada.ID, "wake up")
	select {
	case <-wait:
	default:
		t.Fatal("not woken by a committed change")
	}
	if h, _, _ := db.ChangeHead(context.Background()); h != head+1 {
		t.Errorf("head = %d, want %d", h, head+1)
	}
}

// TestTrimChanges: trimming by count and by age removes the oldest
// changes, and a reader asking for a trimmed position is told so, from
// memory and from disk alike.
func TestTrimChanges(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	for i := range 10 {
		mustCreateMessage(t, db, ada.ID, fmt.Sprintf("message %d", i))
		db.Clock.Add(time.Hour)
	}
	ctx := context.Background()
	n, err := db.TrimChanges(ctx, 0, 7)
	if err != nil || n != 3 {
		t.Fatalf("TrimChanges(keep 7) = %d, %v; want 3", n, err)
	}
	for _, reopened := range []bool{false, true} {
		if reopened {
			reopen(t, db)
		}
		if _, _, err := db.ChangesAfter(context.Background(), 2, 10); !errors.Is(err, model.ErrChangeUnknown) {
			t.Errorf("reopened %v: ChangesAfter(trimmed) = %v, want ErrChangeUnknown", reopened, err)
		}
		if got := mustChangesAfter(t, db.DB, 3); len(got) != 7 {
			t.Errorf("reopened %v: %d changes after the floor, want 7", reopened, len(got))
		}
	}
	// Changes 4..10 were made at hours 3..9; keeping 3.5 hours (the clock
	// is at hour 10) keeps 8, 9 and 10.
	n, err = db.TrimChanges(ctx, 3*time.Hour+30*time.Minute, 0)
	if err != nil || n != 4 {
		t.Fatalf("TrimChanges(keep 3.5h) = %d, %v; want 4", n, err)
	}
	if got := mustChangesAfter(t, db.DB, 7); len(got) != 3 {
		t.Errorf("%d changes after trimming by age, want 3", len(got))
	}
	if n, err := db.TrimChanges(ctx, 3*time.Hour+30*time.Minute, 7); err != nil || n != 0 {
		t.Errorf("second trim = %d, %v; want nothing to do", n, err)
	}
	if problems, err := db.CheckInvariants(); err != nil || len(problems) > 0 {
		t.Errorf("CheckInvariants after trimming = %q, %v", problems, err)
	}
}

// TestChangeLogOfPurgeAndRetention: messages removed by an account
// deletion or by retention are logged as deleted, with their owner's
// e-mail, so streams filtering by owner hear of them.
func TestChangeLogOfPurgeAndRetention(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	bob, _ := mustCreateUser(t, db, "bob@example.com")
	old := mustCreateMessage(t, db, bob.ID, "old news")
	db.Clock.Add(48 * time.Hour)
	mustCreateMessage(t, db, ada.ID, "ada one")
	mustCreateMessage(t, db, ada.ID, "ada two")
	head, _, _ := db.ChangeHead(context.Background())

	if err := db.DeleteAccount(context.Background(), model.ByUser(ada.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DeleteMessagesBefore(context.Background(), db.Clock.Now().Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	got := mustChangesAfter(t, db.DB, head)
	want := []string{
		fmt.Sprintf(`4 tokens.revoked of account %d`, ada.ID), // with the account, before the purge
		`5 message.deleted #3 ada@example.com ""`,             // a purge goes newest first
		`6 message.deleted #2 ada@example.com ""`,
		fmt.Sprintf(`7 message.deleted #%d bob@example.com ""`, old.ID),
	}
	if !equalStrings(got, want) {
		t.Errorf("changes =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestChangeLogOfRetentionDuringPurge: retention that deletes a message of
// an account whose purge has not reached it yet logs the owner's e-mail
// like the purge would, so streams filtering by that owner hear of it.
func TestChangeLogOfRetentionDuringPurge(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	old := mustCreateMessage(t, db, ada.ID, "ada old")
	db.Clock.Add(48 * time.Hour)
	head, _, _ := db.ChangeHead(context.Background())
	// DeleteAccount's first transaction, the purge not yet run.
	if err := db.writes.update(func(tx *bbolt.Tx) error { return db.removeAccount(tx, ada) }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DeleteMessagesBefore(context.Background(), db.Clock.Now().Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	got := mustChangesAfter(t, db.DB, head)
	want := []string{
		fmt.Sprintf(`%d tokens.revoked of account %d`, head+1, ada.ID),
		fmt.Sprintf(`%d message.deleted #%d ada@example.com ""`, head+2, old.ID),
	}
	if !equalStrings(got, want) {
		t.Errorf("changes =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := db.purgeMessages(ada.ID); err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, db.DB)
}

// TestUpgradeFromLayout2 opens a file written by the release before the
// change log (testdata/layout2.db) and checks it is upgraded once, with a
// log line, and that changes are logged from then on.
func TestUpgradeFromLayout2(t *testing.T) {
	path := fixtureCopy(t, "layout2.db")
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	db, err := Open(path, Options{Logger: logger})
	if err != nil {
		t.Fatalf("Open(layout 2) = %v", err)
	}
	if !strings.Contains(log.String(), "upgraded to layout 3") || !strings.Contains(log.String(), "upgraded to layout 4") || strings.Contains(log.String(), "upgraded to layout 2:") {
		t.Errorf("log = %q, want one line for each upgrade from 2 to 4", log.String())
	}
	if problems, err := db.CheckInvariants(); err != nil || len(problems) > 0 {
		t.Errorf("CheckInvariants after the upgrade = %q, %v", problems, err)
	}
	if head, _, _ := db.ChangeHead(context.Background()); head != 0 {
		t.Errorf("head after the upgrade = %d, want an empty log", head)
	}
	u, _, err := db.Authenticate(context.Background(), tokenHash("ada-token"))
	if err != nil || u.Email != "ada@example.com" {
		t.Fatalf("Authenticate(old token) = %+v, %v", u, err)
	}
	tdb := &testDB{DB: db, Path: path}
	if p := mustSearch(t, tdb, model.SearchQuery{Terms: model.Terms("edited")}); len(p.Messages) != 1 {
		t.Errorf("search after the upgrade found %d messages, want 1", len(p.Messages))
	}
	m := mustCreateMessage(t, tdb, u.ID, "the first logged change")
	if got := mustChangesAfter(t, db, 0); len(got) != 1 || got[0] != fmt.Sprintf(`1 message.created #%d ada@example.com "the first logged change"`, m.ID) {
		t.Errorf("log after the upgrade = %q", got)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	log.Reset()
	db, err = Open(path, Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if log.Len() != 0 {
		t.Errorf("second open logged %q, want nothing", log.String())
	}
	var layout uint64
	_ = db.bolt.View(func(tx *bbolt.Tx) error { layout = btoi(tx.Bucket(bucketMeta).Get(metaLayout)); return nil })
	if layout != currentLayout {
		t.Errorf("layout = %d, want %d", layout, currentLayout)
	}
}

func TestChangeRecordRoundTrip(t *testing.T) {
	ch := &model.Change{Seq: 9, Kind: model.MessageUpdated, At: testEpoch.Truncate(time.Microsecond),
		Message: model.Message{ID: 42, OwnerID: 7, OwnerEmail: "ada@example.com", Content: "new ✓", CreatedAt: testEpoch.Truncate(time.Microsecond), UpdatedAt: testEpoch.Add(time.Second).Truncate(time.Microsecond), Revision: 3}}
	got, err := decodeChange(9, encodeChange(ch))
	if err != nil {
		t.Fatal(err)
	}
	if changeString(got) != changeString(ch) || !got.At.Equal(ch.At) || messageString(&got.Message) != messageString(&ch.Message) {
		t.Errorf("round trip = %+v, want %+v", got, ch)
	}
	// Cut anywhere before the content (which runs to the end), a record is
	// refused rather than misread.
	rec := encodeChange(ch)
	for n := range len(rec) - len(ch.Message.Content) {
		if _, err := decodeChange(9, rec[:n]); err == nil {
			t.Fatalf("decodeChange(first %d bytes) = nil error", n)
		}
	}
}

// TestChangeFeedSlicesStayValid: changes handed out from memory are not
// overwritten by later commits, once the feed is full and drops its oldest.
func TestChangeFeedSlicesStayValid(t *testing.T) {
	db := &DB{}
	db.feed.wait = make(chan struct{})
	publish := func(from, n uint64) {
		chs := make([]*model.Change, n)
		for i := range chs {
			chs[i] = &model.Change{Seq: from + uint64(i)}
		}
		db.feed.publish(chs)
	}
	publish(1, feedMemory+10)
	got, _, err := db.ChangesAfter(context.Background(), 100, 50)
	if err != nil || len(got) != 50 || got[0].Seq != 101 {
		t.Fatalf("ChangesAfter(100) = %d changes from %v, %v", len(got), got, err)
	}
	for i := range 3 * feedMemory {
		publish(feedMemory+11+uint64(i), 1)
	}
	for i, ch := range got {
		if ch.Seq != 101+uint64(i) {
			t.Fatalf("a handed-out slice changed under its reader: position %d now holds change %d", i, ch.Seq)
		}
	}
}
