package pg_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"herald/model"
	"herald/pg"
	"herald/pg/pgtest"
)

// TestSchemaUpgradePush: a database at schema version 7, as the landed
// release of notifications left it, with accounts, a reply and its
// notification, is upgraded to Web Push: the version is 8, what it held
// reads as before, the sender starts with no position, and a
// subscription is stored, and deleted with its account.
func TestSchemaUpgradePush(t *testing.T) {
	cluster.Require(t)
	ctx := context.Background()
	url := cluster.Database(t)
	v7 := `CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());` +
		strings.Join(pg.Migrations[:7], "") + `
INSERT INTO schema_version (version) VALUES (1), (2), (3), (4), (5), (6), (7);
INSERT INTO users (id, email, email_key, email_skeleton, password_hash, roles, created_at, handle, name) VALUES
	(1, 'ada@example.com', 'ada@example.com', 's1', 'hash', '{ROLE_USER}', '2026-11-20T10:00:00Z', 'ada', 'Ada'),
	(2, 'bob@example.com', 'bob@example.com', 's2', 'hash', '{ROLE_USER}', '2026-11-20T10:00:00Z', 'bob', 'Bob');
SELECT setval(pg_get_serial_sequence('users', 'id'), 2);
INSERT INTO messages (id, owner_id, content, terms, created_at, updated_at, revision) VALUES
	(1, 1, 'a question', '{a,question}', '2026-11-20T10:01:00Z', '2026-11-20T10:01:00Z', 1);
INSERT INTO messages (id, owner_id, content, terms, created_at, updated_at, revision, reply_to, replies) VALUES
	(2, 2, 'an answer', '{an,answer}', '2026-11-20T10:02:00Z', '2026-11-20T10:02:00Z', 1, 1, 0);
UPDATE messages SET replies = 1 WHERE id = 1;
INSERT INTO changes (seq, kind, at, user_id, message_id, owner_email, content, created_at, updated_at, revision) VALUES
	(1, 1, '2026-11-20T10:01:00Z', 1, 1, 'ada@example.com', 'a question', '2026-11-20T10:01:00Z', '2026-11-20T10:01:00Z', 1),
	(2, 1, '2026-11-20T10:02:00Z', 2, 2, 'bob@example.com', 'an answer', '2026-11-20T10:02:00Z', '2026-11-20T10:02:00Z', 1);
INSERT INTO changes (seq, kind, at, user_id, message_id, owner_email, revision) VALUES (3, 6, '2026-11-20T10:02:00Z', 1, 2, '', 0);
INSERT INTO notifications (id, user_id, kind, at, actor_id, message_id) VALUES (3, 1, 2, '2026-11-20T10:02:00Z', 2, 2);
INSERT INTO notification_marks (user_id, kept) VALUES (1, 1);
UPDATE change_counter SET seq = 3, message_id = 2, message_created = '2026-11-20T10:02:00Z';`
	if err := pgtest.Exec(ctx, url, v7); err != nil {
		t.Fatal(err)
	}
	// Two instances start together on the old schema: one upgrades, and
	// both make (or read) the same key pair.
	dbs := make([]*pg.DB, 2)
	var wg sync.WaitGroup
	for i := range dbs {
		wg.Go(func() { dbs[i] = openURL(t, url, pg.Options{}) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if got, err := pgtest.QueryInt(ctx, url, "SELECT max(version) FROM schema_version"); err != nil || got != 8 {
		t.Fatalf("schema version after the upgrade = %d, %v; want 8", got, err)
	}
	keys := make([]model.VAPIDKeys, 2)
	for i, db := range dbs {
		wg.Go(func() {
			k, err := db.VAPIDKeys(ctx, func() (model.VAPIDKeys, error) {
				return model.VAPIDKeys{Private: bytes.Repeat([]byte{byte(i + 1)}, 32), Public: bytes.Repeat([]byte{byte(i + 1)}, 65)}, nil
			})
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	if !bytes.Equal(keys[0].Private, keys[1].Private) || len(keys[0].Private) != 32 {
		t.Errorf("two instances' key pairs differ")
	}
	db := dbs[0]
	page, err := db.Notifications(ctx, model.ByUser(1), model.NotificationQuery{})
	if err != nil || len(page.Items) != 1 || page.Items[0].ID != 3 {
		t.Errorf("ada's notifications after the upgrade = %+v, %v", page, err)
	}
	if pos, ok, err := db.PushPosition(ctx); ok || pos != 0 || err != nil {
		t.Errorf("PushPosition after the upgrade = %d, %v, %v; want none", pos, ok, err)
	}
	sub := &model.PushSubscription{Endpoint: "https://push.example/1", P256dh: append([]byte{4}, make([]byte, 64)...), Auth: make([]byte, 16)}
	if created, err := db.SavePushSubscription(ctx, model.ByUser(1), sub); err != nil || !created || sub.ID == 0 {
		t.Fatalf("a subscription on the upgraded schema: %+v, %v, %v", sub, created, err)
	}
	if err := db.QueuePushes(ctx, 0, 3, []model.PushNotice{{NotificationID: 3, UserID: 1, Kind: model.NotifyReply, Payload: []byte("{}"), Expires: db.Now().Add(model.PushTTL)}}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteAccount(ctx, model.ByUser(1)); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"push_subscriptions", "push_pending"} {
		if n, err := pgtest.QueryInt(ctx, url, "SELECT count(*) FROM "+table); err != nil || n != 0 {
			t.Errorf("%s after the account's deletion: %d rows, %v", table, n, err)
		}
	}
}
