package pg_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/model"
	"herald/pg"
	"herald/pg/pgtest"
	"herald/storetest"
)

// TestKeyedBatch: creates with keys in one group commit. A key twice in
// the batch is one create, its repeat answered from its record, or
// refused for another request, and the rest of the batch still commits
// together; another account's create with the same key is its own; a key
// whose record is found, and one whose dead record stands in the way,
// are answered as they are alone.
func TestKeyedBatch(t *testing.T) {
	clock := storetest.NewClock()
	var (
		mu      sync.Mutex
		commits []int // the creates of each commit
	)
	db, _ := open(t, pg.Options{Now: clock.Now, OnCommit: func(_ time.Duration, writes int) {
		mu.Lock()
		defer mu.Unlock()
		commits = append(commits, writes)
	}})
	ctx := context.Background()
	var users []*model.User
	for _, email := range []string{"ada@example.com", "bob@example.com"} {
		u := &model.User{Email: email, PasswordHash: storetest.FakePasswordHash}
		if _, err := db.CreateUser(ctx, u, storetest.TokenHash(email), 48*time.Hour, nil); err != nil {
			t.Fatal(err)
		}
		users = append(users, u)
	}
	ada, bob := model.ByToken(storetest.TokenHash("ada@example.com")), model.ByToken(storetest.TokenHash("bob@example.com"))
	k := func(name, request string) *model.IdempotencyKey { key := storetest.Key(name, request); return &key }
	msgs, errs := db.CommitKeyed(
		[]model.Caller{ada, ada, ada, bob, ada, ada, model.ByToken(storetest.TokenHash("never"))},
		[]string{"one", "one", "other", "one", "no key", "two", "unknown"},
		[]*model.IdempotencyKey{k("k1", "one"), k("k1", "one"), k("k1", "other"), k("k1", "one"), nil, k("k2", "two"), k("k3", "x")})
	want := []error{nil, nil, model.ErrKeyReused, nil, nil, nil, model.ErrUnauthorized}
	for i := range want {
		if !errors.Is(errs[i], want[i]) || want[i] == nil && errs[i] != nil {
			t.Fatalf("create %d: %v, want %v", i, errs[i], want[i])
		}
	}
	// The creates of distinct keys, and the one of none, in one commit;
	// then bob's, after the repeats of ada's k1.
	mu.Lock()
	if !slices.Equal(commits, []int{4, 1}) {
		t.Errorf("commits of %v creates, want 4 then 1: a key twice must not send the batch one create at a time", commits)
	}
	mu.Unlock()
	if !reflect.DeepEqual(*msgs[1], *msgs[0]) {
		t.Errorf("the key twice in a batch: %+v then %+v, want the first answer twice", *msgs[0], *msgs[1])
	}
	if msgs[3].OwnerID != users[1].ID || msgs[3].ID == msgs[0].ID {
		t.Errorf("bob's create with ada's key = %+v, want his own", *msgs[3])
	}
	if c, _ := db.Counts(ctx); c.Messages != 4 {
		t.Errorf("%d messages, want 4: one, bob's one, no key, two", c.Messages)
	}

	// Found in a batch of distinct keys; and a day on, the dead records
	// make way.
	again, errs := db.CommitKeyed([]model.Caller{ada, ada}, []string{"two", "three"}, []*model.IdempotencyKey{k("k2", "two"), k("k4", "three")})
	if errs[0] != nil || errs[1] != nil || !reflect.DeepEqual(*again[0], *msgs[5]) {
		t.Errorf("a batch retrying k2 = %+v, %v; want %+v", again, errs, *msgs[5])
	}
	clock.Add(model.IdempotencyWindow)
	later, errs := db.CommitKeyed([]model.Caller{ada, bob}, []string{"one", "one"}, []*model.IdempotencyKey{k("k1", "one"), k("k9", "nine")})
	if errs[0] != nil || errs[1] != nil || later[0].ID <= again[1].ID {
		t.Errorf("k1 a day on in a batch = %+v, %v; want a new message", later, errs)
	}
	if c, _ := db.Counts(ctx); c.Messages != 7 {
		t.Errorf("%d messages, want 7", c.Messages)
	}
}

// TestKeyedCreatesOnTwoInstances: two instances create with one key at
// once, each having looked for the key before the other's create
// committed (both wait for the counter row, held by a third
// transaction). One message is made; the other instance answers with it.
func TestKeyedCreatesOnTwoInstances(t *testing.T) {
	a, url := open(t, pg.Options{})
	b := openURL(t, url, pg.Options{})
	ctx := context.Background()
	u := &model.User{Email: "ada@example.com", PasswordHash: storetest.FakePasswordHash}
	if _, err := a.CreateUser(ctx, u, storetest.TokenHash("ada"), time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	lock, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(ctx)
	tx, err := lock.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM change_counter FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	key := storetest.Key("at once", "said at once")
	var wg sync.WaitGroup
	msgs := make([]*model.Message, 2)
	errs := make([]error, 2)
	for i, db := range []*pg.DB{a, b} {
		wg.Go(func() {
			msgs[i], errs[i] = db.CreateMessageWithKey(ctx, model.ByToken(storetest.TokenHash("ada")), "said at once", key)
		})
	}
	// Polled, not timed: both creates wait for the counter's lock.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		if err := lock.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%idempotency_keys%'`).
			Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d creates wait for the counter after 10 s, want 2", waiting)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i := range errs {
		if errs[i] != nil {
			t.Fatalf("create on instance %d: %v", i, errs[i])
		}
	}
	if !reflect.DeepEqual(*msgs[0], *msgs[1]) {
		t.Errorf("the two instances answered %+v and %+v, want one message", *msgs[0], *msgs[1])
	}
	if c, _ := a.Counts(ctx); c.Messages != 1 {
		t.Errorf("%d messages, want 1", c.Messages)
	}
}

// TestSchemaUpgradeFrom2: a database at schema version 2, as the landed
// release left it with an account, its token and a message, gains the
// idempotency table once (and the certificates' table); the account's
// token creates with a key, its retry gets the first answer, and the
// account's deletion takes its rows.
func TestSchemaUpgradeFrom2(t *testing.T) {
	cluster.Require(t)
	ctx := context.Background()
	url := cluster.Database(t)
	tok := storetest.TokenHash("ada before the upgrade")
	v2 := `CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());` +
		pg.Migrations[0] + pg.Migrations[1] + fmt.Sprintf(`
INSERT INTO schema_version (version) VALUES (1), (2);
INSERT INTO users (id, email, email_key, password_hash, roles, created_at) VALUES
	(1, 'ada@example.com', 'ada@example.com', 'hash', '{ROLE_USER}', now());
SELECT setval(pg_get_serial_sequence('users', 'id'), 1);
INSERT INTO tokens (hash, handle, user_id, created_at, expires_at, last_used_at) VALUES
	('\x%x', '\x0102030405060708', 1, now(), now() + interval '1 day', now());
INSERT INTO messages (id, owner_id, content, terms, created_at, updated_at, revision) VALUES
	(1, 1, 'before', '{before}', now(), now(), 1);
UPDATE change_counter SET message_id = 1, message_created = now();`, tok[:])
	if err := pgtest.Exec(ctx, url, v2); err != nil {
		t.Fatal(err)
	}
	db := openURL(t, url, pg.Options{})
	if got, err := pgtest.QueryInt(ctx, url, "SELECT max(version) FROM schema_version"); err != nil || got != int64(pg.SchemaVersion) {
		t.Fatalf("schema version after the upgrade = %d, %v; want %d", got, err, pg.SchemaVersion)
	}
	// The certificates' table (version 4) came with it.
	if err := db.PutCert(ctx, "herald.example.com", []byte("pem")); err != nil {
		t.Fatalf("storing a certificate after the upgrade: %v", err)
	}
	if got, err := db.Cert(ctx, "herald.example.com"); err != nil || string(got) != "pem" {
		t.Errorf("the certificate stored after the upgrade reads %q, %v", got, err)
	}
	key := storetest.Key("after", "after the upgrade")
	first, err := db.CreateMessageWithKey(ctx, model.ByToken(tok), "after the upgrade", key)
	if err != nil || first.ID != 2 {
		t.Fatalf("a create with a key after the upgrade = %+v, %v; want message 2", first, err)
	}
	if again, err := db.CreateMessageWithKey(ctx, model.ByToken(tok), "after the upgrade", key); err != nil || !reflect.DeepEqual(*again, *first) {
		t.Errorf("its retry = %+v, %v; want %+v", again, err, first)
	}
	if err := db.DeleteAccount(ctx, model.ByToken(tok)); err != nil {
		t.Fatal(err)
	}
	if got, err := pgtest.QueryInt(ctx, url, "SELECT count(*) FROM idempotency_keys"); err != nil || got != 0 {
		t.Errorf("idempotency rows after the account's deletion = %d, %v; want none", got, err)
	}
}
