package pg_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"herald/model"
	"herald/pg"
	"herald/pg/pgtest"
	"herald/storetest"
)

// TestSchemaUpgradeKeepsAuditForSettings: a database at schema version 2,
// as the landed release left it with an administrator and an audit entry,
// gains the settings table and the audit log's settings column; the old
// entry reads as it was, and a settings change is stored and audited.
func TestSchemaUpgradeKeepsAuditForSettings(t *testing.T) {
	cluster.Require(t)
	ctx := context.Background()
	url := cluster.Database(t)
	tok := storetest.TokenHash("root before the upgrade")
	v2 := `CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());` +
		pg.Migrations[0] + pg.Migrations[1] + fmt.Sprintf(`
INSERT INTO schema_version (version) VALUES (1), (2);
INSERT INTO users (id, email, email_key, password_hash, roles, created_at) VALUES
	(1, 'root@example.com', 'root@example.com', 'hash', '{ROLE_USER,ROLE_ADMIN}', now());
SELECT setval(pg_get_serial_sequence('users', 'id'), 1);
INSERT INTO tokens (hash, handle, user_id, created_at, expires_at, last_used_at) VALUES
	('\x%x', '\x0102030405060708', 1, now(), now() + interval '1 day', now());
INSERT INTO audit (at, action, actor_id, actor_email, user_id, user_email, message_id, invite_id, count) VALUES
	(now(), 'grant-admin', 0, '', 1, 'root@example.com', 0, 0, 0);`, tok[:])
	if err := pgtest.Exec(ctx, url, v2); err != nil {
		t.Fatal(err)
	}
	db := openURL(t, url, pg.Options{})
	if got, err := db.Settings(ctx); err != nil || len(got) != 0 {
		t.Fatalf("settings after the upgrade = %v, %v; want none", got, err)
	}
	want := model.Settings{model.SettingRegistration: "closed"}
	if got, err := db.UpdateSettings(ctx, model.ByToken(tok), want); err != nil || !maps.Equal(got, want) {
		t.Fatalf("UpdateSettings = %v, %v; want %v", got, err, want)
	}
	page, err := db.AuditLog(ctx, model.ByServer(), model.AuditQuery{})
	if err != nil || len(page.Entries) != 2 {
		t.Fatalf("audit log = %+v, %v; want two entries", page, err)
	}
	if e := page.Entries[1]; e.Action != model.AuditGrantAdmin || e.UserEmail != "root@example.com" || e.Settings != nil {
		t.Errorf("the landed release's entry reads %+v", e)
	}
	if e := page.Entries[0]; e.Action != model.AuditUpdateSettings || e.ActorID != 1 || !maps.Equal(e.Settings, want) {
		t.Errorf("the settings change's entry reads %+v", e)
	}
}
