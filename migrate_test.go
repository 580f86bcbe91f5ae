package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"herald/bolt"
	"herald/model"
	"herald/pg"
	"herald/storetest"
)

// migrationStore is what the migration test reads from both stores.
type migrationStore interface {
	storetest.Store
	Close() error
}

// TestMigrate copies the databases of older releases, upgraded by this
// one, into PostgreSQL, and checks that the copy answers as the file does:
// the same accounts, the same tokens working, the same messages, the same
// searches, the same change log and floor; that it goes on where the file
// would; and that a second copy into the same database is refused.
func TestMigrate(t *testing.T) {
	cluster := postgresCluster(t)
	for _, tt := range []struct {
		fixture string
		written time.Time
		tokens  map[string]string // token → the e-mail it belongs to
		words   []string
	}{
		{"layout5.db", time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC), nil, []string{"river", "apple", "hello", "tail zebra", "deleted"}},
		{"layout6.db", time.Date(2026, 11, 25, 13, 50, 12, 0, time.UTC), map[string]string{
			"herald_Csgl9FA45wTmrhgj8pIxBoP8HFg20Pkbjhat5TXMFxspKZU1A": "ada@example.com",
			"herald_Mqig24Sk9ohgm-7TTYmrs_BSggeIS2E-pRhOJosIWNotToMMQ": "ada@example.com",
			"herald_ToIyE-E_RnZ7ojicHnU_YrNpY-xWs_4Tm5uePZr2ZgQjFfy2w": "owner@example.com",
		}, []string{"edited", "hello", "message"}},
	} {
		t.Run(tt.fixture, func(t *testing.T) {
			ctx := context.Background()
			clock := storetest.NewClock()
			clock.Add(tt.written.Add(time.Hour).Sub(clock.Now()))
			path := filepath.Join(t.TempDir(), "herald.db")
			src, err := os.ReadFile(filepath.Join("bolt", "testdata", tt.fixture))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, src, 0o600); err != nil {
				t.Fatal(err)
			}
			// As an operator would: this release opens the file once.
			upgraded, err := bolt.Open(path, bolt.Options{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			if err := upgraded.Close(); err != nil {
				t.Fatal(err)
			}

			url := cluster.Database(t)
			code, out, errOut := runArgs(t, "migrate", "--db", path, "--to", url)
			if code != 0 {
				t.Fatalf("migrate = %d\n%s%s", code, out, errOut)
			}
			for _, want := range []string{"copied " + path, "users", "tokens", "messages", "changes"} {
				if !strings.Contains(out, want) {
					t.Errorf("migrate's report lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "DIFFERENT") {
				t.Errorf("migrate reports different counts:\n%s", out)
			}
			code, _, errOut = runArgs(t, "migrate", "--db", path, "--to", url)
			if code != 1 || !strings.Contains(errOut, "is not empty") {
				t.Errorf("a second migrate into the same database = %d, %q; want it refused", code, errOut)
			}

			file, err := bolt.Open(path, bolt.Options{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			db, err := pg.Open(ctx, url, pg.Options{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			stores := []migrationStore{file, db}
			defer func() {
				for _, s := range stores {
					if err := s.Close(); err != nil {
						t.Error(err)
					}
				}
			}()
			compareStores(t, stores, tt.words)
			for token, email := range tt.tokens {
				for i, s := range stores {
					u, tok, err := s.Authenticate(ctx, sha256.Sum256([]byte(token)))
					if err != nil || u.Email != email {
						t.Errorf("store %d: the fixture's token of %s: %v, %v", i, email, u, err)
						continue
					}
					toks, err := s.Tokens(ctx, u.ID)
					if err != nil || !slices.ContainsFunc(toks, func(x *model.Token) bool {
						return x.ID == tok.ID && x.CreatedAt.Equal(tok.CreatedAt) && x.ExpiresAt.Equal(tok.ExpiresAt)
					}) {
						t.Errorf("store %d: token list of %s lacks the token: %v", i, email, err)
					}
				}
			}
			// Both go on the same way: the next message gets the same ID
			// and change position in each.
			owner, err := file.UserByEmail(ctx, "ada@example.com")
			if err != nil {
				t.Fatal(err)
			}
			var next []string
			for _, s := range stores {
				m, err := s.CreateMessage(ctx, model.ByUser(owner.ID), "after the migration")
				if err != nil {
					t.Fatal(err)
				}
				head, _, _ := s.ChangeHead(ctx)
				next = append(next, fmt.Sprintf("message %d at position %d", m.ID, head))
			}
			if next[0] != next[1] {
				t.Errorf("after the copy, the file creates %s and PostgreSQL %s", next[0], next[1])
			}
			// A new account does not take a deleted one's ID.
			for i, s := range stores {
				u := &model.User{Email: "new@example.com", PasswordHash: storetest.FakePasswordHash}
				if _, err := s.CreateUser(ctx, u, storetest.TokenHash(fmt.Sprint("new ", i)), time.Hour, nil); err != nil {
					t.Fatal(err)
				}
				next = append(next, fmt.Sprint(u.ID))
			}
			if next[2] != next[3] {
				t.Errorf("the next account is %s in the file and %s in PostgreSQL", next[2], next[3])
			}

		})
	}
}

// compareStores checks that the stores answer alike: accounts, messages,
// searches by owner and by words, and the change log with its floor.
func compareStores(t *testing.T, stores []migrationStore, words []string) {
	t.Helper()
	ctx := context.Background()
	answers := make([][]string, len(stores))
	for i, s := range stores {
		var lines []string
		add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
		page := func(q model.SearchQuery) {
			for pages := 0; pages < 1000; pages++ {
				_, p, err := s.SearchMessages(ctx, model.ByServer(), q)
				if err != nil {
					add("search %+v: %v", q, err)
					return
				}
				for _, m := range p.Messages {
					add("%+v: %d %d %s %q %s %s r%d", q, m.ID, m.OwnerID, m.OwnerEmail, m.Content, m.CreatedAt, m.UpdatedAt, m.Revision)
				}
				if p.NextBeforeID == 0 {
					return
				}
				q.BeforeID = p.NextBeforeID
			}
		}
		page(model.SearchQuery{Limit: 3})
		var owners []string
		for id := uint64(1); id < 20; id++ {
			u, err := s.UserByID(ctx, id)
			if errors.Is(err, model.ErrNotFound) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			add("user %d %s %s %v %s", u.ID, u.Email, u.PasswordHash, u.Roles, u.CreatedAt)
			owners = append(owners, u.Email)
		}
		for _, email := range owners {
			page(model.SearchQuery{OwnerEmail: strings.ToUpper(email), Limit: 2})
			for _, w := range words {
				page(model.SearchQuery{OwnerEmail: email, Terms: model.Terms(w)})
			}
		}
		for _, w := range words {
			page(model.SearchQuery{Terms: model.Terms(w)})
		}
		head, _, err := s.ChangeHead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		floor := uint64(0)
		for floor < head {
			if _, _, err := s.ChangesAfter(ctx, floor, 1); !errors.Is(err, model.ErrChangeUnknown) {
				break
			}
			floor++
		}
		chs, _, err := s.ChangesAfter(ctx, floor, 1000)
		if err != nil {
			t.Fatal(err)
		}
		add("head %d, floor %d", head, floor)
		for _, ch := range chs {
			add("%s at %s", storetest.ChangeString(ch), ch.At)
		}
		answers[i] = lines
	}
	if len(answers[0]) < 5 {
		t.Fatalf("the file answered too little to prove anything:\n%s", strings.Join(answers[0], "\n"))
	}
	if !slices.Equal(answers[0], answers[1]) {
		t.Errorf("the copy answers differently:\nfile:\n%s\npostgres:\n%s", strings.Join(answers[0], "\n"), strings.Join(answers[1], "\n"))
	}
}

func TestMigrateRefuses(t *testing.T) {
	cluster := postgresCluster(t)
	url := cluster.Database(t)
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"FromURL", []string{"--db", url, "--to", url}, 2, "names the bbolt file"},
		{"ToFile", []string{"--db", "herald.db", "--to", "other.db"}, 2, "--to must be a PostgreSQL URL"},
		{"Extra", []string{"--db", "herald.db", "--to", url, "extra"}, 2, "unexpected argument"},
		{"Missing", []string{"--db", filepath.Join(t.TempDir(), "none.db"), "--to", url}, 1, "does not exist"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runArgs(t, append([]string{"migrate"}, tt.args...)...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Errorf("migrate %v = %d, %q; want %d and %q", tt.args, code, errOut, tt.code, tt.want)
			}
		})
	}
	t.Run("Running", func(t *testing.T) {
		path := seedDB(t, 3)
		db, err := bolt.Open(path, bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		code, _, errOut := runArgs(t, "migrate", "--db", path, "--to", url)
		if code != 1 || !strings.Contains(errOut, "in use by another process") {
			t.Errorf("migrate of a file in use = %d, %q", code, errOut)
		}
	})
	t.Run("Help", func(t *testing.T) {
		code, out, _ := runArgs(t, "migrate", "--help")
		if code != 0 || !strings.Contains(out, "Usage: herald migrate --db FILE --to URL") {
			t.Errorf("migrate --help = %d, %q", code, out)
		}
	})
}
