package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// ownerIndexed reports whether the search index holds owner's term for
// message id, in the postings or the tail, wherever the message is.
func ownerIndexed(t *testing.T, db *testDB, owner, id uint64) bool {
	t.Helper()
	return slices.Contains(termEntries(t, db, id), ownerTerm(owner))
}

func TestCreateMessage(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "Ada@Example.com")
		// A clock in another zone with nanoseconds: the store keeps UTC
		// microseconds.
		zone := time.FixedZone("UTC+5:30", 5*3600+1800)
		db.Clock.Set(time.Date(2026, 3, 4, 10, 11, 12, 987654321, zone))
		want := time.Date(2026, 3, 4, 4, 41, 12, 987654000, time.UTC)

		const content = "  Hello, wörld! 日本語 😀\n"
		m, err := db.CreateMessage(context.Background(), model.ByUser(ada.ID), content)
		if err != nil {
			t.Fatalf("CreateMessage = %v", err)
		}
		if got, want := m.ID, uint64(1); got != want {
			t.Errorf("ID = %d, want %d", got, want)
		}
		if got, want := m.OwnerID, ada.ID; got != want {
			t.Errorf("OwnerID = %d, want %d", got, want)
		}
		if got, want := m.OwnerEmail, "Ada@Example.com"; got != want {
			t.Errorf("OwnerEmail = %q, want %q", got, want)
		}
		if got, want := m.Content, content; got != want {
			t.Errorf("Content = %q, want %q", got, want)
		}
		if got, want := m.Revision, uint64(1); got != want {
			t.Errorf("Revision = %d, want %d", got, want)
		}
		if got := m.CreatedAt; !got.Equal(want) {
			t.Errorf("CreatedAt = %v, want %v", got, want)
		}
		if got, want := m.CreatedAt.Location(), time.UTC; got != want {
			t.Errorf("CreatedAt location = %v, want %v", got, want)
		}
		if got, want := m.UpdatedAt, m.CreatedAt; !got.Equal(want) {
			t.Errorf("UpdatedAt = %v, want CreatedAt %v", got, want)
		}
		if got, want := m.CreatedAt.Nanosecond()%1000, 0; got != want {
			t.Errorf("CreatedAt has %d ns below the microsecond, want %d", got, want)
		}

		// Read back: identical, including the joined e-mail and the
		// microsecond timestamps.
		got := mustMessage(t, db, m.ID)
		if g, w := messageString(got), messageString(m); g != w {
			t.Errorf("Message(%d) = %s, want %s", m.ID, g, w)
		}
		if !got.CreatedAt.Equal(m.CreatedAt) || !got.UpdatedAt.Equal(m.UpdatedAt) {
			t.Errorf("read-back timestamps %v/%v, want %v/%v", got.CreatedAt, got.UpdatedAt, m.CreatedAt, m.UpdatedAt)
		}
		if !ownerIndexed(t, db, ada.ID, m.ID) {
			t.Errorf("the index lacks owner %d of message %d", ada.ID, m.ID)
		}
		if got, want := mustCounts(t, db), (Counts{Users: 1, Tokens: 1, Messages: 1}); got != want {
			t.Errorf("Counts() = %+v, want %+v", got, want)
		}

		// IDs grow with every message, whoever owns it.
		bob, _ := mustCreateUser(t, db, "bob@example.com")
		m2 := mustCreateMessage(t, db, bob.ID, "second")
		m3 := mustCreateMessage(t, db, ada.ID, "third")
		if m2.ID <= m.ID || m3.ID <= m2.ID {
			t.Errorf("IDs %d, %d, %d are not increasing", m.ID, m2.ID, m3.ID)
		}
		if got, want := m2.OwnerEmail, "bob@example.com"; got != want {
			t.Errorf("second message OwnerEmail = %q, want %q", got, want)
		}
		checkIndexes(t, db.DB)
	})

	t.Run("MaxContent", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "ada@example.com")
		content := strings.Repeat("😀", model.MaxContentChars)
		m := mustCreateMessage(t, db, ada.ID, content)
		if got := mustMessage(t, db, m.ID); got.Content != content {
			t.Errorf("Message(%d).Content is %d bytes, want %d", m.ID, len(got.Content), len(content))
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "ada@example.com")
		before := mustCounts(t, db)
		for _, owner := range []uint64{0, ada.ID + 1} {
			if m, err := db.CreateMessage(context.Background(), model.ByUser(owner), "orphan"); !errors.Is(err, model.ErrNotFound) || m != nil {
				t.Errorf("CreateMessage(owner %d) = %v, %v, want nil, ErrNotFound", owner, m, err)
			}
		}
		if got, want := mustCounts(t, db), before; got != want {
			t.Errorf("Counts() = %+v, want %+v", got, want)
		}
		// A refused create does not burn an ID.
		if got, want := mustCreateMessage(t, db, ada.ID, "first").ID, uint64(1); got != want {
			t.Errorf("first stored message ID = %d, want %d", got, want)
		}
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "ada@example.com")
		before := mustCounts(t, db)
		for _, content := range []string{"", " \n\t", "\u3000", "bad \xff", strings.Repeat("x", model.MaxContentChars+1)} {
			_, err := db.CreateMessage(context.Background(), model.ByUser(ada.ID), content)
			if got, want := violationFields(t, err), []string{"content"}; !slices.Equal(got, want) {
				t.Errorf("CreateMessage(%d bytes) fields = %q, want %q", len(content), got, want)
			}
		}
		// Validation comes before the owner lookup.
		_, err := db.CreateMessage(context.Background(), model.ByUser(999), "")
		if !errors.Is(err, model.ErrInvalid) {
			t.Errorf("CreateMessage(missing owner, blank) = %v, want ErrInvalid", err)
		}
		if got, want := mustCounts(t, db), before; got != want {
			t.Errorf("Counts() = %+v, want %+v", got, want)
		}
	})
}

func TestMessage(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	m := mustCreateMessage(t, db, ada.ID, "hello")
	gone := mustCreateMessage(t, db, ada.ID, "soon gone")
	if _, err := db.DeleteMessage(context.Background(), gone.ID, model.ByUser(ada.ID), nil); err != nil {
		t.Fatal(err)
	}

	t.Run("OK", func(t *testing.T) {
		_, got, err := db.Message(context.Background(), model.ByServer(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := messageString(got), messageString(m); g != w {
			t.Errorf("Message(%d) = %s, want %s", m.ID, g, w)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		for _, id := range []uint64{0, gone.ID, gone.ID + 1, 1<<64 - 1} {
			_, got, err := db.Message(context.Background(), model.ByServer(), id)
			if !errors.Is(err, model.ErrNotFound) {
				t.Errorf("Message(%d) = %v, want ErrNotFound", id, err)
			}
			if got != nil {
				t.Errorf("Message(%d) = %s, want nil", id, messageString(got))
			}
		}
	})
}

func TestUpdateMessage(t *testing.T) {
	// setup creates two users and one message of ada's, then moves the clock
	// so an update's UpdatedAt differs from CreatedAt.
	setup := func(t *testing.T) (db *testDB, ada, bob *model.User, m *model.Message) {
		db = mustOpen(t)
		ada, _ = mustCreateUser(t, db, "Ada@Example.com")
		bob, _ = mustCreateUser(t, db, "bob@example.com")
		m = mustCreateMessage(t, db, ada.ID, "original")
		db.Clock.Add(90 * time.Second)
		return db, ada, bob, m
	}

	t.Run("OK", func(t *testing.T) {
		db, ada, _, m := setup(t)
		var seen string // what the precondition saw, before the write
		pre := func(cur *model.Message) bool { seen = messageString(cur); return cur.Revision == 1 }
		got, err := db.UpdateMessage(context.Background(), m.ID, model.ByUser(ada.ID), model.MessageUpdate{Content: ptr("edited ✓")}, pre)
		if err != nil {
			t.Fatalf("UpdateMessage = %v", err)
		}
		if g, w := seen, messageString(m); g != w {
			t.Errorf("precondition saw %s, want the current %s", g, w)
		}
		wantUpdated := db.Clock.Now().Truncate(time.Microsecond)
		if got, want := got.Content, "edited ✓"; got != want {
			t.Errorf("Content = %q, want %q", got, want)
		}
		if got, want := got.Revision, uint64(2); got != want {
			t.Errorf("Revision = %d, want %d", got, want)
		}
		if got, want := got.UpdatedAt, wantUpdated; !got.Equal(want) {
			t.Errorf("UpdatedAt = %v, want %v", got, want)
		}
		if got, want := got.CreatedAt, m.CreatedAt; !got.Equal(want) {
			t.Errorf("CreatedAt = %v, want unchanged %v", got, want)
		}
		if got, want := got.ID, m.ID; got != want {
			t.Errorf("ID = %d, want %d", got, want)
		}
		if got, want := got.OwnerID, ada.ID; got != want {
			t.Errorf("OwnerID = %d, want %d", got, want)
		}
		if got, want := got.OwnerEmail, "Ada@Example.com"; got != want {
			t.Errorf("OwnerEmail = %q, want %q", got, want)
		}
		// What UpdateMessage returned is what is stored.
		assertUnchanged(t, db, got)

		// A second change bumps the revision again.
		db.Clock.Add(time.Second)
		got2, err := db.UpdateMessage(context.Background(), m.ID, model.ByUser(ada.ID), model.MessageUpdate{Content: ptr("edited twice")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := got2.Revision, uint64(3); got != want {
			t.Errorf("Revision after second update = %d, want %d", got, want)
		}
		if !got2.UpdatedAt.After(got.UpdatedAt) {
			t.Errorf("UpdatedAt %v not after previous %v", got2.UpdatedAt, got.UpdatedAt)
		}
		if got, want := mustCounts(t, db).Messages, 1; got != want {
			t.Errorf("Counts().Messages = %d, want %d", got, want)
		}
		checkIndexes(t, db.DB)
	})

	t.Run("NoOp", func(t *testing.T) {
		db, ada, _, m := setup(t)
		for _, tt := range []struct {
			name string
			upd  model.MessageUpdate
		}{
			{"NilContent", model.MessageUpdate{}},
			{"SameContent", model.MessageUpdate{Content: ptr("original")}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				got, err := db.UpdateMessage(context.Background(), m.ID, model.ByUser(ada.ID), tt.upd, nil)
				if err != nil {
					t.Fatalf("UpdateMessage = %v", err)
				}
				if g, w := messageString(got), messageString(m); g != w {
					t.Errorf("UpdateMessage = %s, want unchanged %s", g, w)
				}
				assertUnchanged(t, db, m)
			})
		}
		checkIndexes(t, db.DB)
	})

	t.Run("ErrForbidden", func(t *testing.T) {
		db, _, bob, m := setup(t)
		for _, pre := range []model.Precondition{nil, func(*model.Message) bool { return false }} {
			got, err := db.UpdateMessage(context.Background(), m.ID, model.ByUser(bob.ID), model.MessageUpdate{Content: ptr("hijacked")}, pre)
			if !errors.Is(err, model.ErrForbidden) {
				t.Errorf("UpdateMessage(other owner) = %v, want ErrForbidden", err)
			}
			if got != nil {
				t.Errorf("UpdateMessage(other owner) = %s, want nil", messageString(got))
			}
			assertUnchanged(t, db, m)
		}
		checkIndexes(t, db.DB)
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		db, ada, _, m := setup(t)
		gone := mustCreateMessage(t, db, ada.ID, "gone")
		if _, err := db.DeleteMessage(context.Background(), gone.ID, model.ByUser(ada.ID), nil); err != nil {
			t.Fatal(err)
		}
		for _, id := range []uint64{0, gone.ID, gone.ID + 1} {
			got, err := db.UpdateMessage(context.Background(), id, model.ByUser(ada.ID), model.MessageUpdate{Content: ptr("x")}, nil)
			if !errors.Is(err, model.ErrNotFound) {
				t.Errorf("UpdateMessage(%d) = %v, want ErrNotFound", id, err)
			}
			if got != nil {
				t.Errorf("UpdateMessage(%d) = %s, want nil", id, messageString(got))
			}
		}
		assertUnchanged(t, db, m)
		if got, want := mustCounts(t, db).Messages, 1; got != want {
			t.Errorf("Counts().Messages = %d, want %d", got, want)
		}
		checkIndexes(t, db.DB)
	})

	t.Run("ErrPrecondition", func(t *testing.T) {
		db, ada, _, m := setup(t)
		stale := func(cur *model.Message) bool { return cur.Revision == 0 }
		got, err := db.UpdateMessage(context.Background(), m.ID, model.ByUser(ada.ID), model.MessageUpdate{Content: ptr("lost update")}, stale)
		if !errors.Is(err, model.ErrPrecondition) {
			t.Errorf("UpdateMessage(stale precondition) = %v, want ErrPrecondition", err)
		}
		if got != nil {
			t.Errorf("UpdateMessage(stale precondition) = %s, want nil", messageString(got))
		}
		assertUnchanged(t, db, m)
		// A no-op update still honours the precondition.
		if _, err := db.UpdateMessage(context.Background(), m.ID, model.ByUser(ada.ID), model.MessageUpdate{}, stale); !errors.Is(err, model.ErrPrecondition) {
			t.Errorf("UpdateMessage(no-op, stale precondition) = %v, want ErrPrecondition", err)
		}
		assertUnchanged(t, db, m)
		checkIndexes(t, db.DB)
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		db, ada, _, m := setup(t)
		for _, content := range []string{"", "  \t", "\u00a0\u3000", "bad \xff", strings.Repeat("日", model.MaxContentChars+1)} {
			got, err := db.UpdateMessage(context.Background(), m.ID, model.ByUser(ada.ID), model.MessageUpdate{Content: ptr(content)}, nil)
			if got, want := violationFields(t, err), []string{"content"}; !slices.Equal(got, want) {
				t.Errorf("UpdateMessage(%d bytes) fields = %q, want %q", len(content), got, want)
			}
			if got != nil {
				t.Errorf("UpdateMessage(%d bytes) = %s, want nil", len(content), messageString(got))
			}
			assertUnchanged(t, db, m)
		}
		checkIndexes(t, db.DB)
	})
}

func TestDeleteMessage(t *testing.T) {
	setup := func(t *testing.T) (db *testDB, ada, bob *model.User, m, keep *model.Message) {
		db = mustOpen(t)
		ada, _ = mustCreateUser(t, db, "Ada@Example.com")
		bob, _ = mustCreateUser(t, db, "bob@example.com")
		m = mustCreateMessage(t, db, ada.ID, "delete me")
		keep = mustCreateMessage(t, db, ada.ID, "keep me")
		mustCreateMessage(t, db, bob.ID, "bob's")
		return db, ada, bob, m, keep
	}

	t.Run("OK", func(t *testing.T) {
		db, ada, _, m, keep := setup(t)
		var seen string
		got, err := db.DeleteMessage(context.Background(), m.ID, model.ByUser(ada.ID), func(cur *model.Message) bool { seen = messageString(cur); return true })
		if err != nil {
			t.Fatalf("DeleteMessage = %v", err)
		}
		if g, w := messageString(got), messageString(m); g != w {
			t.Errorf("DeleteMessage returned %s, want the message as it was %s", g, w)
		}
		if g, w := seen, messageString(m); g != w {
			t.Errorf("precondition saw %s, want %s", g, w)
		}
		if _, _, err := db.Message(context.Background(), model.ByServer(), m.ID); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("Message(deleted) = %v, want ErrNotFound", err)
		}
		if ownerIndexed(t, db, ada.ID, m.ID) {
			t.Errorf("the index still holds owner %d of message %d", ada.ID, m.ID)
		}
		if !ownerIndexed(t, db, ada.ID, keep.ID) {
			t.Errorf("the index lost owner %d of message %d", ada.ID, keep.ID)
		}
		assertUnchanged(t, db, keep)
		if got, want := mustCounts(t, db).Messages, 2; got != want {
			t.Errorf("Counts().Messages = %d, want %d", got, want)
		}
		// The owner's search no longer finds it.
		_, page, err := db.SearchMessages(context.Background(), model.ByServer(), model.SearchQuery{OwnerEmail: "ada@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := pageIDs(page), []uint64{keep.ID}; !slices.Equal(got, want) {
			t.Errorf("owner search after delete = %v, want %v", got, want)
		}
		checkIndexes(t, db.DB)
	})

	t.Run("ErrForbidden", func(t *testing.T) {
		db, ada, bob, m, _ := setup(t)
		got, err := db.DeleteMessage(context.Background(), m.ID, model.ByUser(bob.ID), nil)
		if !errors.Is(err, model.ErrForbidden) {
			t.Errorf("DeleteMessage(other owner) = %v, want ErrForbidden", err)
		}
		if got != nil {
			t.Errorf("DeleteMessage(other owner) = %s, want nil", messageString(got))
		}
		assertUnchanged(t, db, m)
		if !ownerIndexed(t, db, ada.ID, m.ID) {
			t.Errorf("the index lost owner %d of message %d after a refused delete", ada.ID, m.ID)
		}
		if got, want := mustCounts(t, db).Messages, 3; got != want {
			t.Errorf("Counts().Messages = %d, want %d", got, want)
		}
		checkIndexes(t, db.DB)
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		db, ada, _, m, _ := setup(t)
		if _, err := db.DeleteMessage(context.Background(), m.ID, model.ByUser(ada.ID), nil); err != nil {
			t.Fatal(err)
		}
		for _, id := range []uint64{0, m.ID, 999} {
			got, err := db.DeleteMessage(context.Background(), id, model.ByUser(ada.ID), nil)
			if !errors.Is(err, model.ErrNotFound) {
				t.Errorf("DeleteMessage(%d) = %v, want ErrNotFound", id, err)
			}
			if got != nil {
				t.Errorf("DeleteMessage(%d) = %s, want nil", id, messageString(got))
			}
		}
		if got, want := mustCounts(t, db).Messages, 2; got != want {
			t.Errorf("Counts().Messages = %d, want %d", got, want)
		}
		checkIndexes(t, db.DB)
	})

	t.Run("ErrPrecondition", func(t *testing.T) {
		db, ada, _, m, _ := setup(t)
		got, err := db.DeleteMessage(context.Background(), m.ID, model.ByUser(ada.ID), func(*model.Message) bool { return false })
		if !errors.Is(err, model.ErrPrecondition) {
			t.Errorf("DeleteMessage(false precondition) = %v, want ErrPrecondition", err)
		}
		if got != nil {
			t.Errorf("DeleteMessage(false precondition) = %s, want nil", messageString(got))
		}
		assertUnchanged(t, db, m)
		if !ownerIndexed(t, db, ada.ID, m.ID) {
			t.Errorf("the index lost owner %d of message %d after a refused delete", ada.ID, m.ID)
		}
		checkIndexes(t, db.DB)
	})
}

// TestCreateInTheTransactionThatEmptiedTheStore: the group commit can put a
// create in the transaction of a purge or a retention pass that deleted
// every message. The create reads the newest creation time from the time
// index, every page of which is then empty; bbolt's Cursor.Last never
// returned there, and the committer, with every write behind it, stopped.
func TestCreateInTheTransactionThatEmptiedTheStore(t *testing.T) {
	manualMerges(t)
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	msgs := bulkMessages(t, db, []uint64{ada.ID}, time.Millisecond, func(i int) string { return fmt.Sprint("message ", i) }, 1500)
	var created *model.Message
	withinSeconds("a create after every message was deleted", func() {
		err := db.writes.update(func(tx *bbolt.Tx) error {
			for _, m := range msgs {
				stored, err := messageRecord(tx, m.ID)
				if err != nil {
					return err
				}
				if err := db.removeMessage(tx, stored); err != nil {
					return err
				}
			}
			owner, err := userByID(tx, ada.ID)
			if err != nil {
				return err
			}
			created, err = db.insertMessage(tx, owner, model.Draft{Content: "the only one left"}, model.SortedTerms("the only one left"))
			return err
		})
		if err != nil {
			t.Error(err)
		}
	})
	if created == nil {
		t.Fatal("nothing created")
	}
	_, page, err := db.SearchMessages(context.Background(), model.ByServer(), model.SearchQuery{})
	if err != nil || len(page.Messages) != 1 || page.Messages[0].ID != created.ID {
		t.Errorf("after the transaction: %+v, %v; want only message %d", page, err, created.ID)
	}
}

func TestMessageRecordRoundTrip(t *testing.T) {
	for _, m := range []*model.Message{
		{ID: 1, OwnerID: 2, Content: "hello", CreatedAt: testEpoch.Truncate(time.Microsecond), UpdatedAt: testEpoch.Truncate(time.Microsecond).Add(time.Hour), Revision: 1},
		{ID: math.MaxUint64, OwnerID: math.MaxUint64, Content: "Ünïcödé 日本語 😀", CreatedAt: time.UnixMicro(0).UTC(), UpdatedAt: time.UnixMicro(-1).UTC(), Revision: math.MaxUint64},
		{ID: 7, Content: "", CreatedAt: time.UnixMicro(math.MaxInt64).UTC(), UpdatedAt: time.UnixMicro(math.MinInt64).UTC()},
	} {
		b := encodeMessage(m)
		got, err := decodeMessage(m.ID, b)
		if err != nil {
			t.Fatalf("decodeMessage(encodeMessage(%s)) = %v", messageString(m), err)
		}
		if g, w := messageString(got), messageString(m); g != w {
			t.Errorf("decodeMessage(encodeMessage(m)) = %s, want %s", g, w)
		}
		if got, want := timeFromKey(timeIndexKey(m.CreatedAt, m.ID)), m.CreatedAt; !got.Equal(want) {
			t.Errorf("timeFromKey(timeIndexKey(%v)) = %v", want, got)
		}
	}
}

func TestDecodeMessageBadRecord(t *testing.T) {
	good := encodeMessage(&model.Message{OwnerID: 1, Content: "x", CreatedAt: testEpoch, UpdatedAt: testEpoch, Revision: 1})
	for name, b := range map[string][]byte{
		"Nil":         nil,
		"Empty":       {},
		"Header-1":    good[:messageHeaderLen-1],
		"Version0":    append([]byte{0}, good[1:]...),
		"Version2":    append([]byte{2}, good[1:]...),
		"OnlyVersion": {messageRecordVersion},
	} {
		if m, err := decodeMessage(1, b); err == nil {
			t.Errorf("decodeMessage(%s) = %s, want an error", name, messageString(m))
		}
	}
	// A header with no content is a valid record of empty content.
	if _, err := decodeMessage(1, good[:messageHeaderLen]); err != nil {
		t.Errorf("decodeMessage(header only) = %v, want nil", err)
	}
}

// FuzzDecodeMessage feeds arbitrary bytes to the record decoders: they must
// never panic, must refuse what they cannot read, and what they accept must
// re-encode to the same bytes and must not alias the input (bbolt reuses it
// once the transaction ends).
func FuzzDecodeMessage(f *testing.F) {
	f.Add(uint64(1), encodeMessage(&model.Message{OwnerID: 1, Content: "hello", CreatedAt: testEpoch, UpdatedAt: testEpoch, Revision: 1}))
	f.Add(uint64(2), encodeMessage(&model.Message{OwnerID: 9, Content: "Ünïcödé 日本語 😀", Revision: 3}))
	f.Add(uint64(3), encodeMessage(&model.Message{Content: "bad \xff utf-8"}))
	f.Add(uint64(0), []byte{})
	f.Add(uint64(0), []byte{messageRecordVersion})
	f.Add(uint64(math.MaxUint64), bytes.Repeat([]byte{0xff}, messageHeaderLen))
	f.Add(uint64(4), encodeToken(&model.Token{UserID: 1, CreatedAt: testEpoch, ExpiresAt: testEpoch.Add(time.Hour)}))
	f.Fuzz(func(t *testing.T, id uint64, b []byte) {
		orig := bytes.Clone(b)

		m, err := decodeMessage(id, b)
		if ok := len(b) >= messageHeaderLen && b[0] == messageRecordVersion; ok != (err == nil) {
			t.Fatalf("decodeMessage(%d, %x) error = %v, want error %v", id, b, err, !ok)
		}
		if err == nil {
			if got, want := m.ID, id; got != want {
				t.Fatalf("ID = %d, want %d", got, want)
			}
			if got, want := m.OwnerID, binary.BigEndian.Uint64(b[1:]); got != want {
				t.Fatalf("OwnerID = %d, want %d", got, want)
			}
			if got, want := m.Content, string(b[messageHeaderLen:]); got != want {
				t.Fatalf("Content = %q, want %q", got, want)
			}
			if got, want := m.OwnerEmail, ""; got != want {
				t.Fatalf("OwnerEmail = %q, want %q (joined on read, not stored)", got, want)
			}
			if got := encodeMessage(m); !bytes.Equal(got, b) {
				t.Fatalf("encodeMessage(decodeMessage(%x)) = %x", b, got)
			}
		}

		if u, err := decodeUser(id, b); err == nil {
			if got := encodeUser(u); !bytes.Equal(got, b) {
				t.Fatalf("encodeUser(decodeUser(%x)) = %x", b, got)
			}
		}

		var h model.TokenHash
		copy(h[:], b)
		tok, err := decodeToken(h, b)
		if ok := len(b) == tokenRecordLen; ok != (err == nil) {
			t.Fatalf("decodeToken(%x) error = %v, want error %v", b, err, !ok)
		}
		if err == nil {
			if got, want := tok.UserID, binary.BigEndian.Uint64(b); got != want {
				t.Fatalf("UserID = %d, want %d", got, want)
			}
			if got := encodeToken(tok); !bytes.Equal(got, b) {
				t.Fatalf("encodeToken(decodeToken(%x)) = %x", b, got)
			}
		}

		// The decoders copied what they kept: scribbling over the input
		// (as bbolt does to freed pages) changes nothing.
		for i := range b {
			b[i] ^= 0xff
		}
		if m != nil {
			if got, want := m.Content, string(orig[messageHeaderLen:]); got != want {
				t.Fatalf("Content changed with the input buffer: %q, want %q", got, want)
			}
		}
		if tok != nil {
			if got, want := tok.UserID, binary.BigEndian.Uint64(orig); got != want {
				t.Fatalf("token UserID changed with the input buffer: %d, want %d", got, want)
			}
		}
	})
}
