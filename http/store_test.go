package http_test

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
// throwaway cluster the tests start themselves (see pgtest). Tests that
// reach bbolt's own files (backups, the file's bytes, its check) open
// bbolt whatever the variable says.
const testStoreEnv = "HERALD_TEST_STORE"

// testStore is what the tests ask of the store under test.
type testStore interface {
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

func TestMain(m *testing.M) {
	code := m.Run()
	if testPostgres.cluster != nil {
		testPostgres.cluster.Stop()
	}
	os.Exit(code)
}

// onPostgres reports whether the tests run over PostgreSQL. It reads the
// variable inside a test, never in TestMain: go test caches a package's
// result by the variables its tests read, and one read before the tests
// run is not seen, so a run over PostgreSQL would be answered from the
// cache of one over bbolt.
func onPostgres(t *testing.T) bool {
	t.Helper()
	switch store := os.Getenv(testStoreEnv); store {
	case "", "bolt":
		return false
	case "postgres":
		return true
	default:
		t.Fatalf("%s=%q: want bolt or postgres", testStoreEnv, store)
		return false
	}
}

// postgresTestCluster is the cluster the tests run on, started by the
// first test that asks.
func postgresTestCluster(t *testing.T) *pgtest.Cluster {
	t.Helper()
	testPostgres.once.Do(func() { testPostgres.cluster = pgtest.Start() })
	cluster := testPostgres.cluster
	if err := cluster.Available(); err != nil {
		t.Fatalf("%s=postgres, but PostgreSQL cannot run: %v", testStoreEnv, err)
	}
	return cluster
}

// pgDatabases maps the paths tests open to the databases standing in for
// them on PostgreSQL, so a test that reopens a path reopens its database.
var pgDatabases sync.Map

// openTestStore opens the store under test at path, with the clock now
// (nil for the real one): the bbolt file at path, or on PostgreSQL the
// database that stands for it, created for the test on first use.
func openTestStore(t *testing.T, path string, now func() time.Time) testStore {
	t.Helper()
	if !onPostgres(t) {
		db, err := bolt.Open(path, testDBOptions(bolt.Options{Now: now}))
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	cluster := postgresTestCluster(t)
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

// storeCounts is the store's record counts, in bbolt's terms.
func storeCounts(s testStore) (bolt.Counts, error) {
	switch db := s.(type) {
	case *bolt.DB:
		return db.Counts()
	case *pg.DB:
		c, err := db.Counts(context.Background())
		return bolt.Counts(c), err
	}
	return bolt.Counts{}, fmt.Errorf("no counts for a store of type %T", s)
}

// checkStore runs the store's own consistency check, where it has one.
func checkStore(s testStore) error {
	if db, ok := s.(*bolt.DB); ok {
		return db.Check()
	}
	return nil
}
