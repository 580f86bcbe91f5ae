package pg_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"herald/auth"
	"herald/chores"
	heraldhttp "herald/http"
	"herald/model"
	"herald/pg"
	"herald/pg/pgtest"
	"herald/storetest"
)

// The PostgreSQL store is every store the HTTP layer asks for, and not the
// optional hot backup: /api/admin/backup answers 501 on it.
var _ heraldhttp.Store = (*pg.DB)(nil)

var cluster *pgtest.Cluster

// faults is a cluster of its own for the tests that kill PostgreSQL's
// processes or pause them, started by the first of them: a backend
// killed makes the server restart every other, which would cut the
// connections of every test on its cluster.
var faults struct {
	once    sync.Once
	cluster *pgtest.Cluster
}

func faultCluster(t *testing.T) *pgtest.Cluster {
	t.Helper()
	faults.once.Do(func() { faults.cluster = pgtest.Start() })
	faults.cluster.Require(t)
	return faults.cluster
}

func TestMain(m *testing.M) {
	cluster = pgtest.Start()
	code := m.Run()
	cluster.Stop()
	if faults.cluster != nil {
		faults.cluster.Stop()
	}
	os.Exit(code)
}

// testTimeout is the deadline of a call in tests that do not test it:
// under the race detector, on a machine other work shares, a statement
// has taken seconds.
const testTimeout = time.Minute

// open opens a store on a fresh database and returns it with the
// database's URL.
func open(t testing.TB, opts pg.Options) (*pg.DB, string) {
	t.Helper()
	url := cluster.Database(t)
	return openURL(t, url, opts), url
}

// openURL opens another store on the database at url, closed at cleanup.
func openURL(t testing.TB, url string, opts pg.Options) *pg.DB {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = testTimeout
	}
	db, err := pg.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db
}

func TestNoHotBackup(t *testing.T) {
	db, _ := open(t, pg.Options{})
	if _, ok := any(db).(heraldhttp.HotBackup); ok {
		t.Error("the PostgreSQL store offers a hot backup; its backups are PostgreSQL's")
	}
}

func TestIsURL(t *testing.T) {
	for s, want := range map[string]bool{
		"postgres://u@host/db":                    true,
		"postgresql://u@host/db":                  true,
		"POSTGRES:///herald?host=/run/postgresql": true,
		"herald.db":                 false,
		"/var/lib/herald/herald.db": false,
		"postgres.db":               false,
		"":                          false,
	} {
		if got := pg.IsURL(s); got != want {
			t.Errorf("IsURL(%q) = %v, want %v", s, got, want)
		}
	}
	for in, want := range map[string]string{
		"postgres://ada:s3cret@db.example.com/herald":        "postgres://ada:xxxxx@db.example.com/herald",
		"postgres:///herald?host=/run/postgresql&password=x": "postgres:///herald?host=%2Frun%2Fpostgresql&password=xxxxx",
		"postgres://ada@db/herald":                           "postgres://ada@db/herald",
	} {
		if got := pg.Redact(in); got != want || strings.Contains(got, "s3cret") {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOpenRefusesAnAmbiguousURL: a password written with a character
// that ends its part of the URL is refused before anything connects,
// with an error naming no part of it; read as written, part of it would
// have become the host or the database, which the connection's error
// prints. Percent-encoded, the same password passes (and fails later,
// connecting, with the password still hidden).
func TestOpenRefusesAnAmbiguousURL(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		url       string
		ambiguous bool
	}{
		{"postgres://herald:Xq7@Zk/Wv:Jp#Ym@127.0.0.1:1/herald", true},
		{"postgres://herald:Xq7@Zk/Wv@127.0.0.1:1/herald", true},
		{"postgres://herald:Xq7@Zk@127.0.0.1:1/herald", true},
		{"postgres://herald:Xq7#Zk@127.0.0.1:1/herald", true},
		{"postgresql://herald@127.0.0.1:1/Xq7@Zk", true},
		{"postgres://herald:Xq7%40Zk%2FWv%3AJp%23Ym@127.0.0.1:1/herald", false},
		{"postgres://herald@/herald?host=/nonexistent&user=a@b", false},
		{"postgres:///herald?host=/nonexistent", false},
	} {
		db, err := pg.Open(ctx, tc.url, pg.Options{})
		if err == nil {
			db.Close()
			t.Fatalf("Open(%q) succeeded", tc.url)
		}
		if refused := strings.Contains(err.Error(), "percent-encoded"); refused != tc.ambiguous {
			t.Errorf("Open(%q): %v; refused as ambiguous %v, want %v", tc.url, err, refused, tc.ambiguous)
		}
		named := []string{"Xq7", "Zk", "Wv", "Jp", "Ym"}
		if tc.ambiguous {
			named = append(named, "127.0.0.1") // no part of the URL at all
		}
		for _, part := range named {
			if strings.Contains(err.Error(), part) {
				t.Errorf("Open(%q): %v; names %q", tc.url, err, part)
			}
		}
	}
}

// TestOpenConcurrently: instances starting together on an empty database
// apply the schema once between them.
func TestOpenConcurrently(t *testing.T) {
	cluster.Require(t)
	url := cluster.Database(t)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	dbs := make([]*pg.DB, n)
	for i := range n {
		wg.Go(func() { dbs[i], errs[i] = pg.Open(context.Background(), url, pg.Options{PoolSize: 2}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("instance %d: %v", i, err)
			continue
		}
		defer dbs[i].Close()
	}
	ctx := context.Background()
	rows, err := pgtest.QueryInt(ctx, url, "SELECT count(*) FROM schema_version")
	if err != nil || rows != int64(pg.SchemaVersion) {
		t.Errorf("schema_version has %d rows (%v), want %d", rows, err, pg.SchemaVersion)
	}
	// All of them work on the one schema.
	u := &model.User{Email: "ada@example.com", PasswordHash: storetest.FakePasswordHash}
	if _, err := dbs[0].CreateUser(ctx, u, storetest.TokenHash("a"), time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	for i, db := range dbs {
		if got, err := db.UserByEmail(ctx, "ADA@example.com"); err != nil || got.ID != u.ID {
			t.Errorf("instance %d: UserByEmail = %v, %v", i, got, err)
		}
	}
}

func TestOpenRefuses(t *testing.T) {
	cluster.Require(t)
	ctx := context.Background()
	t.Run("NewerSchema", func(t *testing.T) {
		_, url := open(t, pg.Options{})
		if err := pgtest.Exec(ctx, url, "INSERT INTO schema_version (version) VALUES (99)"); err != nil {
			t.Fatal(err)
		}
		_, err := pg.Open(ctx, url, pg.Options{})
		if err == nil || !strings.Contains(err.Error(), "version 99, newer than this Herald knows") {
			t.Errorf("Open on a newer schema = %v", err)
		}
	})
	t.Run("AnotherApplicationsTables", func(t *testing.T) {
		url := cluster.Database(t)
		if err := pgtest.Exec(ctx, url, "CREATE TABLE invoices (id int)"); err != nil {
			t.Fatal(err)
		}
		_, err := pg.Open(ctx, url, pg.Options{})
		if err == nil || !strings.Contains(err.Error(), "not Herald's ([invoices])") {
			t.Errorf("Open on another application's database = %v", err)
		}
	})
	t.Run("NotUTF8", func(t *testing.T) {
		url := cluster.Database(t)
		name := pgtest.Name(url) + "_ascii"
		if err := pgtest.Exec(ctx, url, "CREATE DATABASE "+name+" ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pgtest.Exec(ctx, url, "DROP DATABASE "+name) })
		_, err := pg.Open(ctx, cluster.URL(name), pg.Options{})
		if err == nil || !strings.Contains(err.Error(), "Herald needs UTF8") {
			t.Errorf("Open on a SQL_ASCII database = %v", err)
		}
	})
	t.Run("BadURL", func(t *testing.T) {
		_, err := pg.Open(ctx, "postgres://ada:s3cret@/herald?pool_max_conns=zero", pg.Options{})
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open with a bad URL = %v", err)
		}
	})
}

// follow reads the log from after through db, waking on ChangeHead, until
// it holds want changes or the time runs out.
func follow(ctx context.Context, db *pg.DB, after uint64, want int) ([]*model.Change, error) {
	var got []*model.Change
	for len(got) < want {
		_, wait, err := db.ChangeHead(ctx)
		if err != nil {
			return got, err
		}
		chs, _, err := db.ChangesAfter(ctx, after, 500)
		if err != nil {
			return got, err
		}
		got = append(got, chs...)
		if len(chs) > 0 {
			after = chs[len(chs)-1].Seq
			continue
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return got, fmt.Errorf("%d of %d changes: %w", len(got), want, ctx.Err())
		}
	}
	return got, nil
}

// TestChangesAcrossInstances: writers on two instances of one database,
// concurrently; readers on each see one log, dense, every change once, in
// one order, whatever instance wrote it.
func TestChangesAcrossInstances(t *testing.T) {
	a, url := open(t, pg.Options{})
	b := openURL(t, url, pg.Options{})
	ctx := context.Background()
	var users []*model.User
	for i := range 4 {
		u := &model.User{Email: fmt.Sprintf("w%d@example.com", i), PasswordHash: storetest.FakePasswordHash}
		if _, err := a.CreateUser(ctx, u, storetest.TokenHash(u.Email), time.Hour, nil); err != nil {
			t.Fatal(err)
		}
		users = append(users, u)
	}
	const each = 60
	total := len(users) * each
	results := make([][]*model.Change, 2)
	errs := make([]error, 2)
	var readers sync.WaitGroup
	readCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for i, db := range []*pg.DB{a, b} {
		readers.Go(func() { results[i], errs[i] = follow(readCtx, db, 0, total) })
	}
	var writers sync.WaitGroup
	for i, u := range users {
		db := []*pg.DB{a, b}[i%2]
		writers.Go(func() {
			for j := range each {
				if _, err := db.CreateMessage(ctx, model.ByUser(u.ID), fmt.Sprintf("%d says %d", u.ID, j)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	writers.Wait()
	readers.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("reader %d: %v", i, err)
		}
	}
	for i, got := range results {
		if len(got) != total {
			t.Fatalf("reader %d saw %d changes, want %d", i, len(got), total)
		}
		for j, ch := range got {
			if ch.Seq != uint64(j+1) || ch.Message.ID != uint64(j+1) {
				t.Fatalf("reader %d: change %d is %d of message %d; want positions and IDs dense, in commit order", i, j+1, ch.Seq, ch.Message.ID)
			}
		}
	}
	if !slices.EqualFunc(results[0], results[1], func(x, y *model.Change) bool {
		return storetest.ChangeString(x) == storetest.ChangeString(y)
	}) {
		t.Error("the two instances read different logs")
	}
}

// TestLostNotification: an instance whose listening connection is cut
// still learns of every change, from its poll, within a poll's delay.
func TestLostNotification(t *testing.T) {
	a, url := open(t, pg.Options{})
	b := openURL(t, url, pg.Options{PollEvery: 200 * time.Millisecond})
	ctx := context.Background()
	u := &model.User{Email: "ada@example.com", PasswordHash: storetest.FakePasswordHash}
	if _, err := a.CreateUser(ctx, u, storetest.TokenHash("ada"), time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		head, wait, err := b.ChangeHead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Cut every listening connection, then write at once: the
		// notification has nobody to reach.
		if err := pgtest.Exec(ctx, url, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND query ILIKE 'LISTEN%'`); err != nil {
			t.Fatal(err)
		}
		if _, err := a.CreateMessage(ctx, model.ByUser(u.ID), fmt.Sprint("round ", round)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-wait:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: instance b never heard of the change", round)
		}
		chs, _, err := b.ChangesAfter(ctx, head, 10)
		if err != nil || len(chs) != 1 || chs[0].Message.Content != fmt.Sprint("round ", round) {
			t.Fatalf("round %d: b reads %v, %v", round, chs, err)
		}
	}
}

// TestLeaderTakeover: of instances running their chores, one leads; when
// its connection dies (the instance crashed, or lost the network),
// PostgreSQL ends its session and the lock with it, and another instance
// takes the lead and does the chores.
func TestLeaderTakeover(t *testing.T) {
	a, url := open(t, pg.Options{})
	b := openURL(t, url, pg.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	report := func(chore string, err error) { t.Logf("%s: %v", chore, err) }
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 20s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// a leads first, and looks again only after an hour: as good as dead
	// once its connection is cut.
	wg.Go(func() { chores.Run(ctx, a, chores.Config{FlushEvery: time.Hour, SweepEvery: time.Hour}, report) })
	waitFor("lead by a", a.Leading)
	// b's sweeps keep one change of the log.
	wg.Go(func() {
		chores.Run(ctx, b, chores.Config{FlushEvery: 50 * time.Millisecond, SweepEvery: 50 * time.Millisecond, ChangesKeepMax: 1}, report)
	})
	u := &model.User{Email: "ada@example.com", PasswordHash: storetest.FakePasswordHash}
	if _, err := a.CreateUser(ctx, u, storetest.TokenHash("ada"), time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := b.CreateMessage(ctx, model.ByUser(u.ID), "hello"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if b.Leading() {
		t.Fatal("b leads while a holds the lock")
	}
	if _, _, err := b.ChangesAfter(ctx, 0, 10); err != nil {
		t.Fatalf("the log was trimmed while b did not lead: %v", err)
	}
	if err := pgtest.Exec(ctx, url, `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND objid = 2 AND objsubid = 2 AND granted`); err != nil {
		t.Fatal(err)
	}
	waitFor("lead by b", b.Leading)
	waitFor("trim by b", func() bool {
		_, _, err := b.ChangesAfter(ctx, 1, 1)
		return errors.Is(err, model.ErrChangeUnknown)
	})
}

// TestResignOnStop: an instance that stops its chores gives the lead up
// at once.
func TestResignOnStop(t *testing.T) {
	a, url := open(t, pg.Options{})
	b := openURL(t, url, pg.Options{})
	cfg := chores.Config{FlushEvery: 20 * time.Millisecond, SweepEvery: time.Hour}
	ctxA, stopA := context.WithCancel(context.Background())
	doneA := make(chan struct{})
	go func() { defer close(doneA); chores.Run(ctxA, a, cfg, func(string, error) {}) }()
	deadline := time.Now().Add(10 * time.Second)
	for !a.Leading() {
		if time.Now().After(deadline) {
			t.Fatal("a never led")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctxB, stopB := context.WithCancel(context.Background())
	doneB := make(chan struct{})
	go func() { defer close(doneB); chores.Run(ctxB, b, cfg, func(string, error) {}) }()
	defer func() { stopB(); <-doneB }()
	time.Sleep(100 * time.Millisecond)
	if b.Leading() {
		t.Fatal("b leads while a does")
	}
	stopA()
	<-doneA
	if a.Leading() {
		t.Error("a still says it leads after its chores stopped")
	}
	for !b.Leading() {
		if time.Now().After(deadline) {
			t.Fatal("b never took the lead")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSearchBudget builds the worst case for an intersection — two common
// words that never occur together but twice — on more messages than a
// page's windows span, and checks that a page gives up with a cursor
// rather than read every message, and that following the cursors still
// finds exactly the two.
func TestSearchBudget(t *testing.T) {
	db, url := open(t, pg.Options{})
	ctx := context.Background()
	u := &model.User{Email: "ada@example.com", PasswordHash: storetest.FakePasswordHash}
	if _, err := db.CreateUser(ctx, u, storetest.TokenHash("ada"), time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	n := 3 * pg.SearchSpan
	// Filled in SQL: a hundred thousand creates through the store would
	// take minutes. Terms as model.SortedTerms would give them.
	both := []int64{7, n - 100}
	if err := pgtest.Exec(ctx, url, `INSERT INTO messages (id, owner_id, content, terms, created_at, updated_at, revision)
		SELECT i, $1, convert_to(CASE WHEN i = ANY($3) THEN 'left right' WHEN i % 2 = 1 THEN 'right' ELSE 'left' END, 'UTF8'),
			CASE WHEN i = ANY($3) THEN ARRAY['left', 'right'] WHEN i % 2 = 1 THEN ARRAY['right'] ELSE ARRAY['left'] END,
			now(), now(), 1
		FROM generate_series(1, $2::bigint) i;
		`, int64(u.ID), n, both); err != nil {
		t.Fatal(err)
	}
	if err := pgtest.Exec(ctx, url, `UPDATE change_counter SET message_id = $1, message_created = now()`, n); err != nil {
		t.Fatal(err)
	}
	if err := pgtest.Exec(ctx, url, `ANALYZE messages`); err != nil {
		t.Fatal(err)
	}
	// Written behind the store's back: it hears of the new messages as it
	// would of another instance's, when it next reads the head.
	if _, _, err := db.ChangeHead(ctx); err != nil {
		t.Fatal(err)
	}
	q := model.SearchQuery{Terms: model.Terms("left right")}
	var got []uint64
	pages := 0
	for {
		_, p, err := db.SearchMessages(ctx, model.ByServer(), q)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, m := range p.Messages {
			got = append(got, m.ID)
		}
		if p.NextBeforeID == 0 {
			break
		}
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		q.BeforeID = p.NextBeforeID
	}
	if want := []uint64{uint64(n - 100), 7}; !slices.Equal(got, want) {
		t.Errorf("matches = %v, want %v", got, want)
	}
	if pages < 3 {
		t.Errorf("found in %d pages: one page read more than its %d IDs", pages, pg.SearchSpan)
	}
	// A client that goes away ends its search.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := db.SearchMessages(gone, model.ByServer(), model.SearchQuery{Terms: model.Terms("left right")}); !errors.Is(err, context.Canceled) {
		t.Errorf("search with its client gone = %v, want context.Canceled", err)
	}
	if _, _, err := db.SearchMessages(ctx, model.ByServer(), model.SearchQuery{Terms: model.Terms("left")}); err != nil {
		t.Errorf("search after a cancelled one = %v", err)
	}
}

// TestCreateBatch: creates written as one group commit are each checked on
// their own — a working token, one revoked, one expired, an account by
// ID, an unknown one — and those that pass get consecutive IDs and
// positions in the order given, with one change each.
func TestCreateBatch(t *testing.T) {
	clock := storetest.NewClock()
	db, _ := open(t, pg.Options{Now: clock.Now})
	ctx := context.Background()
	users := make([]*model.User, 3)
	for i := range users {
		users[i] = &model.User{Email: fmt.Sprintf("u%d@example.com", i), PasswordHash: storetest.FakePasswordHash}
		ttl := time.Hour
		if i == 2 {
			ttl = time.Minute
		}
		if _, err := db.CreateUser(ctx, users[i], storetest.TokenHash(fmt.Sprint("u", i)), ttl, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.RevokeToken(ctx, storetest.TokenHash("u1")); err != nil {
		t.Fatal(err)
	}
	clock.Add(2 * time.Minute) // u2's token has expired
	head, _, _ := db.ChangeHead(ctx)
	by := []model.Caller{
		model.ByToken(storetest.TokenHash("u0")),
		model.ByToken(storetest.TokenHash("u1")),
		model.ByUser(users[1].ID),
		model.ByToken(storetest.TokenHash("u2")),
		model.ByUser(999),
		model.ByToken(storetest.TokenHash("u0")),
		model.ByToken(storetest.TokenHash("never")),
	}
	contents := []string{"first words", "revoked", "by account", "expired", "nobody", "second NFC café", "unknown"}
	msgs, errs, err := db.CreateBatch(ctx, by, contents)
	if err != nil {
		t.Fatal(err)
	}
	wantErr := []error{nil, model.ErrUnauthorized, nil, model.ErrUnauthorized, model.ErrNotFound, nil, model.ErrUnauthorized}
	var created []*model.Message
	for i := range by {
		if !errors.Is(errs[i], wantErr[i]) || (wantErr[i] == nil && errs[i] != nil) {
			t.Errorf("create %d (%q): %v, want %v", i, contents[i], errs[i], wantErr[i])
		}
		if errs[i] == nil {
			created = append(created, msgs[i])
		}
	}
	if len(created) != 3 {
		t.Fatalf("%d created, want 3", len(created))
	}
	for i, m := range created {
		if i > 0 && m.ID != created[i-1].ID+1 {
			t.Errorf("IDs %d then %d: not consecutive", created[i-1].ID, m.ID)
		}
		if _, got, err := db.Message(ctx, model.ByServer(), m.ID); err != nil || *got != *m {
			t.Errorf("message %d as stored: %+v, %v; created %+v", m.ID, got, err, m)
		}
	}
	chs, now, err := db.ChangesAfter(ctx, head, 100)
	if err != nil || len(chs) != 3 || now != head+3 {
		t.Fatalf("changes after the batch: %d, head %d, %v", len(chs), now, err)
	}
	for i, ch := range chs {
		if ch.Message != *created[i] || ch.Seq != head+uint64(i)+1 {
			t.Errorf("change %d: %s, want the creation of %+v", ch.Seq, storetest.ChangeString(ch), created[i])
		}
	}
	_, page, err := db.SearchMessages(ctx, model.ByServer(), model.SearchQuery{Terms: model.Terms("CAFE\u0301 second")})
	if err != nil || len(page.Messages) != 1 || page.Messages[0].ID != created[2].ID {
		t.Errorf("search for the batch's words: %v, %v", page, err)
	}
}

// TestSuspendWhilePosting: an administrator suspends, or removes, an
// account whose devices keep posting through another instance. The
// administrator's write and the creates must not wait for each other:
// with deadlock_timeout raised to a minute, a deadlock between them would
// hold both, and every write waiting on the change log's counter, past
// the test's patience.
func TestSuspendWhilePosting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	url := cluster.Database(t)
	if err := pgtest.Exec(ctx, cluster.URL("postgres"), "ALTER DATABASE "+pgtest.Name(url)+" SET deadlock_timeout = '1min'"); err != nil {
		t.Fatal(err)
	}
	a := openURL(t, url, pg.Options{})
	b := openURL(t, url, pg.Options{})
	root := &model.User{Email: "root@example.com", PasswordHash: storetest.FakePasswordHash}
	if err := a.CreateAdministrator(ctx, root); err != nil {
		t.Fatal(err)
	}
	for round := range 6 {
		u := &model.User{Email: fmt.Sprintf("spam%d@example.com", round), PasswordHash: storetest.FakePasswordHash}
		tokens := []model.TokenHash{storetest.TokenHash(fmt.Sprint("spam ", round))}
		if _, err := a.CreateUser(ctx, u, tokens[0], time.Hour, nil); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			h := storetest.TokenHash(fmt.Sprint("spam ", round, " device ", i))
			if _, err := a.IssueLoginToken(ctx, u.ID, u.PasswordHash, h, time.Hour); err != nil {
				t.Fatal(err)
			}
			tokens = append(tokens, h)
		}
		var posted atomic.Int64
		var wg sync.WaitGroup
		for _, tok := range tokens {
			for range 2 {
				wg.Go(func() {
					for {
						_, err := b.CreateMessage(ctx, model.ByToken(tok), "spam, spam, spam")
						switch {
						case errors.Is(err, model.ErrUnauthorized):
							return // suspended or removed: the token is gone
						case err != nil:
							t.Errorf("a create beside the administrator's write: %v", err)
							return
						}
						posted.Add(1)
					}
				})
			}
		}
		for posted.Load() < 50 {
			time.Sleep(time.Millisecond)
		}
		var err error
		if round%2 == 0 {
			suspend := true
			_, err = a.UpdateAccount(ctx, model.ByServer(), u.ID, model.AccountUpdate{Suspended: &suspend})
		} else {
			err = a.RemoveAccount(ctx, model.ByServer(), u.ID)
		}
		if err != nil {
			t.Fatalf("round %d: the administrator's write beside a flood of creates: %v", round, err)
		}
		wg.Wait()
	}
}

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
