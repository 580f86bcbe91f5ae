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

// testCluster is the PostgreSQL cluster the tests run on; nil on bbolt.
var testCluster *pgtest.Cluster

func TestMain(m *testing.M) {
	switch store := os.Getenv(testStoreEnv); store {
	case "", "bolt":
	case "postgres":
		testCluster = pgtest.Start()
		if err := testCluster.Available(); err != nil {
			fmt.Fprintf(os.Stderr, "%s=postgres, but PostgreSQL cannot run: %v\n", testStoreEnv, err)
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: want bolt or postgres\n", testStoreEnv, store)
		os.Exit(2)
	}
	code := m.Run()
	if testCluster != nil {
		testCluster.Stop()
	}
	os.Exit(code)
}

// pgDatabases maps the paths tests open to the databases standing in for
// them on PostgreSQL, so a test that reopens a path reopens its database.
var pgDatabases sync.Map

// openTestStore opens the store under test at path, with the clock now
// (nil for the real one): the bbolt file at path, or on PostgreSQL the
// database that stands for it, created for the test on first use.
func openTestStore(t *testing.T, path string, now func() time.Time) testStore {
	t.Helper()
	if testCluster == nil {
		db, err := bolt.Open(path, testDBOptions(bolt.Options{Now: now}))
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	url, ok := pgDatabases.Load(path)
	if !ok {
		// A copy of a database with Herald's schema applied once: cheaper
		// than applying it in every test.
		template := testCluster.Template(t, "herald", func(url string) error {
			db, err := pg.Open(context.Background(), url, pg.Options{PoolSize: 1})
			if err != nil {
				return err
			}
			return db.Close()
		})
		url, _ = pgDatabases.LoadOrStore(path, testCluster.DatabaseFrom(t, template))
	}
	db, err := pg.Open(context.Background(), url.(string), pg.Options{Now: now, PoolSize: 6, PollEvery: 100 * time.Millisecond})
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
