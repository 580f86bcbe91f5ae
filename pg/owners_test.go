package pg_test

import (
	"context"
	"testing"
	"time"

	"herald/model"
	"herald/pg"
	"herald/storetest"
)

// Pages name their messages' owners whether the instance has read the
// owner's address before or not, on every instance of a database.
func TestOwnersOnEveryInstance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	one, url := open(t, pg.Options{})
	two := openURL(t, url, pg.Options{})
	var tokens []model.TokenHash
	for _, name := range []string{"ada", "bob", "cy"} {
		tok := storetest.TokenHash(name)
		if _, err := one.CreateUser(ctx, &model.User{Email: name + "@example.com", PasswordHash: storetest.FakePasswordHash}, tok, time.Hour, nil); err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, tok)
		for i := range 2 {
			if _, err := one.CreateMessage(ctx, model.ByToken(tok), "a message "+string(rune('a'+i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(db *pg.DB, q model.SearchQuery, want int) {
		t.Helper()
		_, page, err := db.SearchMessages(ctx, model.ByToken(tokens[0]), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Messages) != want {
			t.Fatalf("%d messages, want %d", len(page.Messages), want)
		}
		for _, m := range page.Messages {
			owner := map[uint64]string{1: "ada", 2: "bob", 3: "cy"}[m.OwnerID]
			if m.OwnerEmail != owner+"@example.com" {
				t.Errorf("message %d of owner %d: owner's address %q", m.ID, m.OwnerID, m.OwnerEmail)
			}
		}
	}
	// The second instance has read no address yet; then both have.
	for range 2 {
		for _, db := range []*pg.DB{two, one} {
			check(db, model.SearchQuery{}, 6)
			check(db, model.SearchQuery{Terms: []string{"message"}}, 6)
			check(db, model.SearchQuery{OwnerEmail: "bob@example.com"}, 2)
		}
	}
	if kept := two.OwnersKept(); kept != 3 {
		t.Errorf("the second instance keeps %d addresses, want 3", kept)
	}
}

// A page read before its owner's account was deleted loses that owner's
// messages, as if read a moment later, rather than naming nobody.
func TestOwnerDeletedAfterThePage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, url := open(t, pg.Options{})
	var tokens []model.TokenHash
	for _, name := range []string{"ada", "bob"} {
		tok := storetest.TokenHash(name)
		if _, err := db.CreateUser(ctx, &model.User{Email: name + "@example.com", PasswordHash: storetest.FakePasswordHash}, tok, time.Hour, nil); err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, tok)
		if _, err := db.CreateMessage(ctx, model.ByToken(tok), "by "+name); err != nil {
			t.Fatal(err)
		}
	}
	_, page, err := db.SearchMessages(ctx, model.ByToken(tokens[0]), model.SearchQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 2 {
		t.Fatalf("%d messages", len(page.Messages))
	}
	if err := db.DeleteAccount(ctx, model.ByToken(tokens[1])); err != nil {
		t.Fatal(err)
	}
	// The page as read, on an instance that has read no address yet.
	other := openURL(t, url, pg.Options{})
	var read []*model.Message
	for _, m := range page.Messages {
		read = append(read, &model.Message{ID: m.ID, OwnerID: m.OwnerID})
	}
	got, err := other.FillOwners(ctx, read)
	if err != nil {
		t.Fatal(err)
	}
	// ada's address is read, and bob's is gone with his account.
	if len(got) != 1 || got[0].OwnerEmail != "ada@example.com" {
		t.Fatalf("got %+v", got)
	}
}
