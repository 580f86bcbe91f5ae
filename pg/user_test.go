package pg_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"herald/model"
	"herald/pg"
	"herald/pg/pgtest"
	"herald/storetest"
)

// TestSchemaUpgradeGivesHandles: the accounts of a database at schema
// version 3, as the landed release left it, get, once and logged, the
// handles they would get registering now, in the order they were made,
// each named by it; an account registered after the upgrade gets the next
// free one.
func TestSchemaUpgradeGivesHandles(t *testing.T) {
	cluster.Require(t)
	ctx := context.Background()
	url := cluster.Database(t)
	v3 := `CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());` +
		pg.Migrations[0] + pg.Migrations[1] + pg.Migrations[2] + `
INSERT INTO schema_version (version) VALUES (1), (2), (3);
INSERT INTO users (id, email, email_key, email_skeleton, password_hash, roles, created_at) VALUES
	(1, 'Ada@example.com', 'ada@example.com', 's1', 'hash', '{ROLE_USER}', now()),
	(2, 'ada@example.org', 'ada@example.org', 's2', 'hash', '{ROLE_USER}', now()),
	(3, '1@example.com', '1@example.com', 's3', 'hash', '{ROLE_USER}', now()),
	(4, 'ｒoot@example.com', 'ｒoot@example.com', 's4', 'hash', '{ROLE_USER,ROLE_ADMIN}', now());
SELECT setval(pg_get_serial_sequence('users', 'id'), 4);`
	if err := pgtest.Exec(ctx, url, v3); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	db := openURL(t, url, pg.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if got := log.String(); strings.Count(got, "every account has a handle") != 1 || !strings.Contains(got, "users=4") {
		t.Errorf("the upgrade logged %q, want the handles given once, to 4 accounts", got)
	}
	for id, handle := range map[uint64]string{1: "ada", 2: "ada2", 3: "user", 4: "oot"} {
		u, err := db.UserByID(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if u.Handle != handle || u.Name != handle {
			t.Errorf("account %d: handle %q, name %q; want %q for both", id, u.Handle, u.Name, handle)
		}
	}
	u := &model.User{Email: "ada@example.net", PasswordHash: storetest.FakePasswordHash}
	if _, err := db.CreateUser(ctx, u, storetest.TokenHash("ada3"), time.Hour, nil); err != nil || u.Handle != "ada3" {
		t.Errorf("registering after the upgrade: handle %q, %v; want ada3", u.Handle, err)
	}
}
