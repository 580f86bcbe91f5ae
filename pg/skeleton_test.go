package pg_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"herald/model"
	"herald/pg"
	"herald/pg/pgtest"
	"herald/storetest"
)

// TestSchemaUpgradeLookAlikes: a database at schema version 2, the
// landed release's, holding accounts whose e-mails look alike (which that
// release let register), is upgraded by two instances starting together:
// once, logging each pair once and changing none of the accounts. Each
// still logs in and posts; a new account looking like any of them is
// refused, even once the oldest is gone.
func TestSchemaUpgradeLookAlikes(t *testing.T) {
	cluster.Require(t)
	ctx := context.Background()
	url := cluster.Database(t)
	v2 := `CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());` +
		pg.Migrations[0] + pg.Migrations[1] + `
INSERT INTO schema_version (version) VALUES (1), (2);`
	if err := pgtest.Exec(ctx, url, v2); err != nil {
		t.Fatal(err)
	}
	accounts := []string{1: "root@example.com", 2: "\uff52oot@example.com", 3: "ada@example.com", 4: "r\u1d0fot@example.com"}
	for id, email := range accounts[1:] {
		hash := storetest.TokenHash(email)
		if err := pgtest.Exec(ctx, url, `INSERT INTO users (id, email, email_key, password_hash, roles, created_at)
			VALUES ($1, $2, $3, 'hash', '{ROLE_USER}', now())`, int64(id+1), email, model.EmailKey(email)); err != nil {
			t.Fatal(err)
		}
		if err := pgtest.Exec(ctx, url, `INSERT INTO tokens (hash, handle, user_id, created_at, expires_at, last_used_at)
			VALUES ($1, $2, $3, now(), now() + interval '1 day', now())`, hash[:], hash[:len(model.TokenID{})], int64(id+1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pgtest.Exec(ctx, url, `SELECT setval(pg_get_serial_sequence('users', 'id'), 4)`); err != nil {
		t.Fatal(err)
	}

	var logs [2]bytes.Buffer
	var dbs [2]*pg.DB
	errs := make(chan error, len(dbs))
	for i := range dbs {
		go func() {
			var err error
			dbs[i], err = pg.Open(ctx, url, pg.Options{Logger: slog.New(slog.NewTextHandler(&logs[i], nil))})
			errs <- err
		}()
	}
	for range dbs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, db := range dbs {
		defer db.Close()
	}
	log := logs[0].String() + logs[1].String()
	for _, pair := range []string{
		"account=1 email=root@example.com look_alike_account=2 look_alike_email=" + accounts[2],
		"account=1 email=root@example.com look_alike_account=4 look_alike_email=" + accounts[4],
		"account=2 email=" + accounts[2] + " look_alike_account=4 look_alike_email=" + accounts[4],
	} {
		if strings.Count(log, pair) != 1 {
			t.Errorf("the instances logged %q, want the pair %q once", log, pair)
		}
	}
	if got := strings.Count(log, "look alike"); got != 3 {
		t.Errorf("the instances logged %d pairs, want 3:\n%s", got, log)
	}
	if n, err := pgtest.QueryInt(ctx, url, `SELECT count(*) FROM information_schema.columns WHERE table_name = 'users' AND column_name = 'email_skeleton' AND is_nullable = 'NO'`); err != nil || n != 1 {
		t.Errorf("users.email_skeleton NOT NULL: %d, %v", n, err)
	}

	for id, email := range accounts[1:] {
		u, _, err := dbs[id%2].Authenticate(ctx, storetest.TokenHash(email))
		if err != nil || u.ID != uint64(id+1) || u.Email != email {
			t.Fatalf("the token of %s: %+v, %v; want account %d as it was", email, u, err, id+1)
		}
		if _, err := dbs[id%2].CreateMessage(ctx, model.ByToken(storetest.TokenHash(email)), "still here"); err != nil {
			t.Errorf("%s posting after the upgrade: %v", email, err)
		}
	}
	register := func(email string) error {
		_, err := dbs[0].CreateUser(ctx, &model.User{Email: email, PasswordHash: storetest.FakePasswordHash}, storetest.TokenHash("new "+email), time.Hour, nil)
		return err
	}
	for email, want := range map[string]error{
		"ROOT@example.com":           model.EmailTaken("ROOT@example.com"),
		"r\u1d0f\u1d0ft@example.com": model.EmailLookAlike("r\u1d0f\u1d0ft@example.com"),
		"bob@example.com":            nil,
	} {
		var me *model.Error
		if err := register(email); (want == nil && err != nil) || (want != nil && (!errors.As(err, &me) || me.Error() != want.Error())) {
			t.Errorf("registering %s: %v, want %v", email, err, want)
		}
	}
	// The oldest of the three gone, the others still hold the look.
	if err := dbs[1].DeleteAccount(ctx, model.ByToken(storetest.TokenHash(accounts[1]))); err != nil {
		t.Fatal(err)
	}
	if err := register(accounts[1]); !errors.Is(err, model.ErrConflict) {
		t.Errorf("registering %s beside its look-alikes alone: %v, want a conflict", accounts[1], err)
	}
}
