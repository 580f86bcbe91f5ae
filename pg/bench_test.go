package pg_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"herald/model"
	"herald/pg"
	"herald/storetest"
)

// BenchmarkPageOfMessages reads the newest 20 messages of 200, each of
// about 300 bytes, as a page without words does: what reading a page's
// rows costs Herald, PostgreSQL's round trip included.
func BenchmarkPageOfMessages(b *testing.B) {
	ctx := context.Background()
	db, _ := open(b, pg.Options{})
	tok := storetest.TokenHash("ada")
	if _, err := db.CreateUser(ctx, &model.User{Email: "ada@example.com", PasswordHash: storetest.FakePasswordHash}, tok, time.Hour, nil); err != nil {
		b.Fatal(err)
	}
	for i := range 200 {
		content := fmt.Sprintf("message %d: %s", i, strings.Repeat("the quick brown fox jumps over the lazy dog ", 7))
		if _, err := db.CreateMessage(ctx, model.ByToken(tok), content); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		_, page, err := db.SearchMessages(ctx, model.ByToken(tok), model.SearchQuery{})
		if err != nil {
			b.Fatal(err)
		}
		if len(page.Messages) != 20 {
			b.Fatalf("%d messages", len(page.Messages))
		}
	}
}

// BenchmarkAuthorsGone asks whether the 64 authors of a stream's catch-up
// still have accounts, one deleted: in one read, as a catch-up asks, and
// one read an author, as it asked before.
func BenchmarkAuthorsGone(b *testing.B) {
	ctx := context.Background()
	db, _ := open(b, pg.Options{})
	var ids []uint64
	for i := range 64 {
		u := &model.User{Email: fmt.Sprintf("author%d@example.com", i), PasswordHash: storetest.FakePasswordHash}
		if _, err := db.CreateUser(ctx, u, storetest.TokenHash(u.Email), time.Hour, nil); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, u.ID)
	}
	if err := db.DeleteAccount(ctx, model.ByToken(storetest.TokenHash("author7@example.com"))); err != nil {
		b.Fatal(err)
	}
	b.Run("one read", func(b *testing.B) {
		for b.Loop() {
			if missing, err := db.MissingUsers(ctx, ids); err != nil || len(missing) != 1 {
				b.Fatalf("MissingUsers = %v, %v", missing, err)
			}
		}
	})
	b.Run("a read an author", func(b *testing.B) {
		for b.Loop() {
			gone := 0
			for _, id := range ids {
				if _, err := db.UserByID(ctx, id); err != nil {
					gone++
				}
			}
			if gone != 1 {
				b.Fatalf("%d gone", gone)
			}
		}
	})
}
