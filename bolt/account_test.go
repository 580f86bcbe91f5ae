package bolt

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

func TestDeleteAccount(t *testing.T) {
	db := mustOpen(t)
	ada, adaReg := mustCreateUser(t, db, "Ada@Example.com")
	bob, _ := mustCreateUser(t, db, "bob@example.com")
	phone := tokenHash("ada phone")
	if _, err := db.CreateToken(ada.ID, phone, defaultTTL); err != nil {
		t.Fatal(err)
	}
	// More than one purge transaction's worth of messages, in the search
	// index's postings (merged) and in its tail, where a purge finds them
	// through their owner's term.
	say := func(i int) string { return fmt.Sprint("shared word ", i) }
	adas := bulkMessages(t, db, []uint64{ada.ID}, time.Millisecond, say, purgeChunk+1)
	mergeAll(t, db.DB)
	adas = append(adas, bulkMessages(t, db, []uint64{ada.ID}, time.Millisecond, say, purgeChunk+2)...)
	bobs := bulkMessages(t, db, []uint64{bob.ID}, time.Millisecond, func(i int) string { return fmt.Sprint("shared word bob ", i) }, 5)

	if err := db.DeleteAccount(context.Background(), model.ByToken(phone)); err != nil {
		t.Fatalf("DeleteAccount = %v", err)
	}
	for _, h := range []model.TokenHash{adaReg, phone} {
		if _, _, err := db.Authenticate(context.Background(), h); !errors.Is(err, model.ErrUnauthorized) {
			t.Errorf("Authenticate(a deleted account's token) = %v, want ErrUnauthorized", err)
		}
	}
	if _, err := db.UserByID(context.Background(), ada.ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("UserByID(deleted) = %v, want ErrNotFound", err)
	}
	for _, m := range adas[:3] {
		if _, _, err := db.Message(context.Background(), model.ByServer(), m.ID); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("Message(%d) of a deleted account = %v, want ErrNotFound", m.ID, err)
		}
	}
	if got, want := mustCounts(t, db), (Counts{Users: 1, Tokens: 1, Messages: len(bobs)}); got != want {
		t.Errorf("Counts() = %+v, want %+v", got, want)
	}
	if got := pageIDs(mustSearch(t, db, model.SearchQuery{Terms: model.Terms("shared word"), Limit: 100})); len(got) != len(bobs) {
		t.Errorf("search after deletion = %d messages, want bob's %d", len(got), len(bobs))
	}
	// The e-mail can register again, as a new account with nothing of the old.
	again, _ := mustCreateUser(t, db, "ada@example.com")
	if again.ID == ada.ID {
		t.Errorf("the new account reuses the deleted account's ID %d", ada.ID)
	}
	if p := mustSearch(t, db, model.SearchQuery{OwnerEmail: "ada@example.com"}); len(p.Messages) != 0 {
		t.Errorf("owner search for the re-registered e-mail = %d messages, want none", len(p.Messages))
	}
	if err := db.DeleteAccount(context.Background(), model.ByToken(phone)); !errors.Is(err, model.ErrUnauthorized) {
		t.Errorf("DeleteAccount with a deleted account's token = %v, want ErrUnauthorized", err)
	}
}

// TestDeleteAccountInterrupted stops a deletion after the account's own
// transaction, as a crash would: the messages must already be invisible,
// and the next Open must finish removing them.
func TestDeleteAccountInterrupted(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	bob, _ := mustCreateUser(t, db, "bob@example.com")
	adas := bulkMessages(t, db, []uint64{ada.ID}, time.Millisecond, func(i int) string { return fmt.Sprint("ada says ", i) }, purgeChunk+10)
	kept := mustCreateMessage(t, db, bob.ID, "bob says hello")
	// The first half of DeleteAccount, then stop.
	err := db.bolt.Update(func(tx *bbolt.Tx) error { return db.removeAccount(tx, ada) })
	if err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, db.DB) // a half-purged account is a consistent state
	m := adas[len(adas)-1]
	if _, _, err := db.Message(context.Background(), model.ByServer(), m.ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("Message of an account being deleted = %v, want ErrNotFound", err)
	}
	content := "edited"
	if _, err := db.UpdateMessage(context.Background(), m.ID, model.ByUser(bob.ID), model.MessageUpdate{Content: &content}, nil); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("UpdateMessage of an account being deleted = %v, want ErrNotFound", err)
	}
	p := mustSearch(t, db, model.SearchQuery{Terms: model.Terms("says"), Limit: 1})
	if got := pageIDs(p); len(got) != 1 || got[0] != kept.ID || p.NextBeforeID != 0 {
		t.Errorf("search while the account is being deleted = %v (next %d), want only bob's %d", got, p.NextBeforeID, kept.ID)
	}

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := Open(filepath.Join(filepath.Dir(db.Path), "herald.db"), Options{Now: db.Clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	db.DB = reopened
	if got, want := mustCounts(t, db).Messages, 1; got != want {
		t.Errorf("messages after reopening = %d, want %d", got, want)
	}
}
