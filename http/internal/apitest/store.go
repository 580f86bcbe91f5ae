package apitest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"herald/bolt"
	heraldhttp "herald/http"
	"herald/pg"
	"herald/pg/pgtest"
)

// The HTTP tests run over bbolt, and over PostgreSQL when
// HERALD_TEST_STORE=postgres: each test then gets a fresh database in a
// throwaway cluster the tests start themselves (see pgtest), which
// StopPostgres stops once the package's tests are done. Tests that reach
// bbolt's own files (backups, the file's bytes, its check) open bbolt
// whatever the variable says.

// StoreEnv names the variable that picks the store under test.
const StoreEnv = "HERALD_TEST_STORE"

// Store is what the tests ask of the store under test.
type Store interface {
	heraldhttp.Store
	TrimChanges(ctx context.Context, keepFor time.Duration, keepMax int) (int, error)
	Close() error
}

// testPostgres is the PostgreSQL cluster the tests run on, started by the
// first test that needs it; nil on bbolt.
var testPostgres struct {
	once    sync.Once
	cluster *pgtest.Cluster
}

// OnPostgres reports whether the tests run over PostgreSQL. It reads the
// variable inside a test, never in TestMain: go test caches a package's
// result by the variables its tests read, and one read before the tests
// run is not seen, so a run over PostgreSQL would be answered from the
// cache of one over bbolt.
func OnPostgres(t *testing.T) bool {
	t.Helper()
	switch store := os.Getenv(StoreEnv); store {
	case "", "bolt":
		return false
	case "postgres":
		return true
	default:
		t.Fatalf("%s=%q: want bolt or postgres", StoreEnv, store)
		return false
	}
}

// PostgresCluster is the cluster the tests run on, started by the
// first test that asks.
func PostgresCluster(t *testing.T) *pgtest.Cluster {
	t.Helper()
	testPostgres.once.Do(func() { testPostgres.cluster = pgtest.Start() })
	cluster := testPostgres.cluster
	if err := cluster.Available(); err != nil {
		t.Fatalf("%s=postgres, but PostgreSQL cannot run: %v", StoreEnv, err)
	}
	return cluster
}

// StopPostgres stops the cluster, if a test started one; a package's
// TestMain calls it once its tests are done.
func StopPostgres() {
	if testPostgres.cluster != nil {
		testPostgres.cluster.Stop()
	}
}

// pgDatabases maps the paths tests open to the databases standing in for
// them on PostgreSQL, so a test that reopens a path reopens its database.
var pgDatabases sync.Map

// PostgresURL is the URL of the database standing for path, "" when none
// does yet.
func PostgresURL(path string) string {
	url, _ := pgDatabases.Load(path)
	s, _ := url.(string)
	return s
}

// UsePostgres makes the database at url stand for path: OpenStore opens
// it for path from then on.
func UsePostgres(path, url string) { pgDatabases.Store(path, url) }

// OpenStore opens the store under test at path, with the clock now
// (nil for the real one): the bbolt file at path, or on PostgreSQL the
// database that stands for it, created for the test on first use.
func OpenStore(t *testing.T, path string, now func() time.Time) Store {
	t.Helper()
	if !OnPostgres(t) {
		db, err := bolt.Open(path, DBOptions(bolt.Options{Now: now}))
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	cluster := PostgresCluster(t)
	url, ok := pgDatabases.Load(path)
	if !ok {
		// A copy of a database with Herald's schema applied once: cheaper
		// than applying it in every test.
		template := cluster.Template(t, "herald", func(url string) error {
			db, err := pg.Open(context.Background(), url, pg.Options{PoolSize: 1})
			if err != nil {
				return err
			}
			return db.Close()
		})
		url, _ = pgDatabases.LoadOrStore(path, cluster.DatabaseFrom(t, template))
	}
	// A minute for a call, not the ten seconds a server gives it: under
	// the race detector, on a machine other work shares, a statement has
	// taken seconds.
	db, err := pg.Open(context.Background(), url.(string), pg.Options{Now: now, PoolSize: 6, PollEvery: 100 * time.Millisecond, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// StoreCounts is the store's record counts, in bbolt's terms.
func StoreCounts(s Store) (bolt.Counts, error) {
	switch db := s.(type) {
	case *bolt.DB:
		return db.Counts()
	case *pg.DB:
		c, err := db.Counts(context.Background())
		return bolt.Counts(c), err
	}
	return bolt.Counts{}, fmt.Errorf("no counts for a store of type %T", s)
}

// CheckStore runs the store's own consistency check, where it has one.
func CheckStore(s Store) error {
	if db, ok := s.(*bolt.DB); ok {
		return db.Check()
	}
	return nil
}
