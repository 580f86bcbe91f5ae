package pg_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/auth"
	"herald/model"
	"herald/pg"
	"herald/pg/pgtest"
	"herald/storetest"
)

// TestSchemaUpgrade: a database at schema version 1, as the first Herald
// on PostgreSQL left it and with its data, is brought to the current
// version once by instances starting together, keeps its data, and
// serves what the new version added.
func TestSchemaUpgrade(t *testing.T) {
	cluster.Require(t)
	ctx := context.Background()
	url := cluster.Database(t)
	v1 := `CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());` +
		pg.Migrations[0] + `
INSERT INTO schema_version (version) VALUES (1);
INSERT INTO users (id, email, email_key, password_hash, roles, created_at) VALUES
	(1, 'ada@example.com', 'ada@example.com', 'hash', '{ROLE_USER}', now());
SELECT setval(pg_get_serial_sequence('users', 'id'), 1);`
	if err := pgtest.Exec(ctx, url, v1); err != nil {
		t.Fatal(err)
	}
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	dbs := make([]*pg.DB, n)
	for i := range n {
		wg.Go(func() { dbs[i], errs[i] = pg.Open(ctx, url, pg.Options{PoolSize: 2}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("instance %d on a version-1 database: %v", i, err)
		}
		defer dbs[i].Close()
	}
	if got, err := pgtest.QueryInt(ctx, url, "SELECT max(version) FROM schema_version"); err != nil || got != int64(pg.SchemaVersion) {
		t.Fatalf("schema version after the upgrade = %d, %v; want %d", got, err, pg.SchemaVersion)
	}
	if got, err := pgtest.QueryInt(ctx, url, "SELECT count(*) FROM schema_version"); err != nil || got != int64(pg.SchemaVersion) {
		t.Errorf("schema_version rows = %d, %v: a migration applied more than once", got, err)
	}
	ada, err := dbs[1].UserByEmail(ctx, "ada@example.com")
	if err != nil || ada.ID != 1 {
		t.Fatalf("the account from before the upgrade: %+v, %v", ada, err)
	}
	if _, err := dbs[2].UpdateAccount(ctx, model.ByServer(), ada.ID, model.AccountUpdate{Suspended: new(true)}); err != nil {
		t.Errorf("suspending an account from before the upgrade: %v", err)
	}
	inv := &model.Invite{CodeHash: storetest.TokenHash("after"), MaxUses: 1, ExpiresAt: time.Now().Add(time.Hour)}
	if err := dbs[3].CreateInvite(ctx, model.ByServer(), inv); err != nil {
		t.Errorf("an invitation after the upgrade: %v", err)
	}
	if ok, _ := dbs[0].Limiter("writes", auth.Rate{Burst: 1, Every: time.Hour}).Spend(ctx, "ada"); !ok {
		t.Error("the shared limits after the upgrade")
	}
}

// TestSchemaUpgradeScrubsChangeLog: a database at schema version 2, its
// change log written as the landed Herald wrote it (the content of every
// change, an update's replaced content, a deletion's last content), is
// upgraded to a log that keeps a message's content in its newest change
// only, and a dump of it holds nothing edited away or deleted; its changes
// then read as the messages are now, and the next edit scrubs as any does.
func TestSchemaUpgradeScrubsChangeLog(t *testing.T) {
	cluster.Require(t)
	ctx := context.Background()
	url := cluster.Database(t)
	v2 := `CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());` +
		pg.Migrations[0] + pg.Migrations[1] + `
INSERT INTO schema_version (version) VALUES (1), (2);
INSERT INTO users (id, email, email_key, password_hash, roles, created_at) VALUES
	(1, 'ada@example.com', 'ada@example.com', 'hash', '{ROLE_USER}', '2026-11-20T10:00:00Z'),
	(2, 'bob@example.com', 'bob@example.com', 'hash', '{ROLE_USER}', '2026-11-20T10:00:00Z');
SELECT setval(pg_get_serial_sequence('users', 'id'), 2);
INSERT INTO messages (id, owner_id, content, terms, created_at, updated_at, revision) VALUES
	(1, 1, 'final words', '{final,words}', '2026-11-20T10:01:00Z', '2026-11-20T10:03:00Z', 2),
	(3, 2, 'kept message', '{kept,message}', '2026-11-20T10:06:00Z', '2026-11-20T10:06:00Z', 1);
INSERT INTO changes (seq, kind, at, user_id, message_id, owner_email, content, before, created_at, updated_at, revision) VALUES
	(1, 1, '2026-11-20T10:01:00Z', 1, 1, 'ada@example.com', 'first draft secret', '', '2026-11-20T10:01:00Z', '2026-11-20T10:01:00Z', 1),
	(2, 1, '2026-11-20T10:02:00Z', 2, 2, 'bob@example.com', 'regretted words', '', '2026-11-20T10:02:00Z', '2026-11-20T10:02:00Z', 1),
	(3, 2, '2026-11-20T10:03:00Z', 1, 1, 'ada@example.com', 'final words', 'first draft secret', '2026-11-20T10:01:00Z', '2026-11-20T10:03:00Z', 2),
	(4, 3, '2026-11-20T10:04:00Z', 2, 2, 'bob@example.com', 'regretted words', '', '2026-11-20T10:02:00Z', '2026-11-20T10:02:00Z', 1),
	(5, 4, '2026-11-20T10:05:00Z', 2, 0, '', '', '', NULL, NULL, 0),
	(6, 1, '2026-11-20T10:06:00Z', 2, 3, 'bob@example.com', 'kept message', '', '2026-11-20T10:06:00Z', '2026-11-20T10:06:00Z', 1);
UPDATE change_counter SET seq = 6, message_id = 3, message_created = '2026-11-20T10:06:00Z';`
	if err := pgtest.Exec(ctx, url, v2); err != nil {
		t.Fatal(err)
	}
	db := openURL(t, url, pg.Options{})
	before, err := dump(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"first draft secret", "regretted words"} {
		if bytes.Contains(before, []byte(hex.EncodeToString([]byte(gone)))) {
			t.Errorf("a dump of the upgraded database holds %q", gone)
		}
	}
	for _, there := range []string{"final words", "kept message"} {
		if !bytes.Contains(before, []byte(hex.EncodeToString([]byte(there)))) {
			t.Errorf("a dump of the upgraded database lacks %q, which is there: the check above proves nothing", there)
		}
	}
	chs, head, err := db.ChangesAfter(ctx, 0, 100)
	if err != nil || head != 6 {
		t.Fatalf("ChangesAfter(0) = %v, head %d, %v", chs, head, err)
	}
	want := []string{
		`1 message.created #1 of 1 ada@example.com "final words" r2 2026-11-20T10:01:00Z 2026-11-20T10:03:00Z scrubbed`,
		`2 message.created #2 of 2 bob@example.com "" r1 2026-11-20T10:02:00Z 2026-11-20T10:02:00Z scrubbed gone`,
		`3 message.updated #1 of 1 ada@example.com "final words" r2 2026-11-20T10:01:00Z 2026-11-20T10:03:00Z`,
		`4 message.deleted #2 of 2 bob@example.com "" r1 2026-11-20T10:02:00Z 2026-11-20T10:02:00Z`,
		`5 tokens.revoked of account 2`,
		`6 message.created #3 of 2 bob@example.com "kept message" r1 2026-11-20T10:06:00Z 2026-11-20T10:06:00Z`,
	}
	var got []string
	for _, ch := range chs {
		got = append(got, storetest.ChangeString(ch))
	}
	if !slices.Equal(got, want) {
		t.Errorf("log after the upgrade:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := db.UpdateMessage(ctx, 3, model.ByUser(2), model.MessageUpdate{Content: new("changed message")}, nil); err != nil {
		t.Fatal(err)
	}
	after, err := dump(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(after, []byte(hex.EncodeToString([]byte("kept message")))) {
		t.Error("a dump after an edit holds the content it replaced")
	}
}
