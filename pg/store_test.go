package pg_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

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
