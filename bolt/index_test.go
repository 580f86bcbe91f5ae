package bolt

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// termEntries lists the terms indexed for message id: its terms entries
// when a merge has reached it, its tail record when not.
func termEntries(t *testing.T, db *testDB, id uint64) []string {
	t.Helper()
	var got []string
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		if id > readTermsState(tx).merged {
			got, _ = tailRecordTerms(tx.Bucket(bucketTermsTail).Get(itob(id)))
			return nil
		}
		var ids []uint64
		return tx.Bucket(bucketPostings).ForEach(func(k, v []byte) error {
			ids, _ = decodeBlock(ids[:0], btoi(k[len(k)-8:]), v)
			if _, found := slices.BinarySearch(ids, id); found {
				got = append(got, string(k[:len(k)-9]))
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	return got
}

func TestTermIndex(t *testing.T) {
	t.Run("CreateUpdateDelete", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "ada@example.com")
		m := mustCreateMessage(t, db, ada.ID, "Hello, hello WORLD! Café")
		if got, want := termEntries(t, db, m.ID), []string{"@1", "café", "hello", "world"}; !slices.Equal(got, want) {
			t.Errorf("after create: terms = %q, want %q", got, want)
		}
		content := "world peace"
		if _, err := db.UpdateMessage(context.Background(), m.ID, model.ByUser(ada.ID), model.MessageUpdate{Content: &content}, nil); err != nil {
			t.Fatal(err)
		}
		if got, want := termEntries(t, db, m.ID), []string{"@1", "peace", "world"}; !slices.Equal(got, want) {
			t.Errorf("after update: terms = %q, want %q", got, want)
		}
		if got := pageIDs(mustSearch(t, db, model.SearchQuery{Terms: model.Terms("hello")})); len(got) != 0 {
			t.Errorf("search for a word the edit removed = %v, want nothing", got)
		}
		if got, want := pageIDs(mustSearch(t, db, model.SearchQuery{Terms: model.Terms("PEACE")})), []uint64{m.ID}; !slices.Equal(got, want) {
			t.Errorf("search for a word the edit added = %v, want %v", got, want)
		}
		if _, err := db.DeleteMessage(context.Background(), m.ID, model.ByUser(ada.ID), nil); err != nil {
			t.Fatal(err)
		}
		if got := termEntries(t, db, m.ID); len(got) != 0 {
			t.Errorf("after delete: terms = %q, want none", got)
		}
	})

	t.Run("NFCAndNFD", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "ada@example.com")
		nfd := mustCreateMessage(t, db, ada.ID, "un cafe\u0301 noir")
		nfc := mustCreateMessage(t, db, ada.ID, "un CAFÉ crème")
		want := []uint64{nfc.ID, nfd.ID}
		for _, q := range []string{"café", "cafe\u0301", "CAFE\u0301", "Café"} {
			if got := pageIDs(mustSearch(t, db, model.SearchQuery{Terms: model.Terms(q)})); !slices.Equal(got, want) {
				t.Errorf("search %q = %v, want %v", q, got, want)
			}
		}
		if got := pageIDs(mustSearch(t, db, model.SearchQuery{Terms: model.Terms("cafe")})); len(got) != 0 {
			t.Errorf("search %q = %v, want nothing: the accent is part of the word", "cafe", got)
		}
	})

	t.Run("LongWords", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "ada@example.com")
		// 10,000 four-byte letters: one word far beyond bbolt's key limit.
		huge := strings.Repeat("𝒜", model.MaxContentChars)
		m := mustCreateMessage(t, db, ada.ID, huge)
		if got, want := pageIDs(mustSearch(t, db, model.SearchQuery{Terms: model.Terms(huge)})), []uint64{m.ID}; !slices.Equal(got, want) {
			t.Errorf("search for the whole long word = %v, want %v", got, want)
		}
		if got := pageIDs(mustSearch(t, db, model.SearchQuery{Terms: model.Terms(huge[:400])})); len(got) != 0 {
			t.Errorf("search for a prefix of the long word = %v, want nothing", got)
		}
	})
}

func TestCreationTimeNeverFalls(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	m1 := mustCreateMessage(t, db, ada.ID, "first")
	db.Clock.Add(-time.Hour) // the wall clock steps back
	m2 := mustCreateMessage(t, db, ada.ID, "second")
	if m2.CreatedAt.Before(m1.CreatedAt) {
		t.Errorf("second message created at %v, before the first at %v", m2.CreatedAt, m1.CreatedAt)
	}
	since := m1.CreatedAt
	if got, want := pageIDs(mustSearch(t, db, model.SearchQuery{Since: &since})), []uint64{m2.ID, m1.ID}; !slices.Equal(got, want) {
		t.Errorf("since the first message = %v, want %v", got, want)
	}
}

// TestFirstCreatedAtOrAfter compares the binary search that turns since
// and until into IDs with a scan of every message, for bounds at, between,
// before and after the messages' times, over IDs with gaps (deleted
// messages, the first and the last among them) and runs of messages
// created in the same microsecond.
func TestFirstCreatedAtOrAfter(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	var msgs []*model.Message
	for i, step := range []time.Duration{0, time.Second, 0, 0, time.Microsecond, time.Hour, 0, time.Millisecond, 3 * time.Second, 0, time.Microsecond, time.Minute, 0, time.Second} {
		db.Clock.Add(step)
		msgs = append(msgs, mustCreateMessage(t, db, ada.ID, fmt.Sprintf("message %d", i)))
	}
	for _, i := range []int{0, 4, 5, 9, len(msgs) - 1} {
		if _, err := db.DeleteMessage(context.Background(), msgs[i].ID, model.ByUser(ada.ID), nil); err != nil {
			t.Fatal(err)
		}
	}
	var bounds []time.Time
	for _, m := range msgs {
		for _, d := range []time.Duration{-time.Hour, -time.Microsecond, -time.Nanosecond, 0, time.Nanosecond, time.Microsecond} {
			bounds = append(bounds, m.CreatedAt.Add(d))
		}
	}
	bounds = append(bounds, time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC))
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		for _, bound := range bounds {
			var want uint64 // a scan: the first stored message created at or after bound
			_ = tx.Bucket(bucketMessages).ForEach(func(k, v []byte) error {
				if want == 0 && !microsToTime(createdMicros(v)).Before(bound) {
					want = btoi(k)
				}
				return nil
			})
			got, ok := firstCreatedAtOrAfter(tx.Bucket(bucketMessages).Cursor(), bound)
			if got != want || ok != (want != 0) {
				t.Errorf("firstCreatedAtOrAfter(%s) = %d, %v; a scan finds %d", bound.Format(time.RFC3339Nano), got, ok, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// And with no messages at all.
	for _, m := range msgs {
		_, _ = db.DeleteMessage(context.Background(), m.ID, model.ByUser(ada.ID), nil)
	}
	err = db.bolt.View(func(tx *bbolt.Tx) error {
		if got, ok := firstCreatedAtOrAfter(tx.Bucket(bucketMessages).Cursor(), bounds[0]); ok {
			t.Errorf("firstCreatedAtOrAfter with no messages = %d, true; want none", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// addPosting adds one posting as a merge or an edit would.
func addPosting(tx *bbolt.Tx, term string, id uint64) error {
	return termBlocks(tx.Bucket(bucketPostings), []byte(term)).add([]uint64{id})
}
