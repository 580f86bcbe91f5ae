package pg_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"herald/bolt"
	"herald/pg"
	"herald/storetest"
)

// openForSuite opens a PostgreSQL store on a fresh database for the
// conformance suite, closed at cleanup.
func openForSuite(t *testing.T, now func() time.Time) storetest.Opened {
	t.Helper()
	db, _ := open(t, pg.Options{Now: now})
	return storetest.Opened{
		Store: db,
		Counts: func(ctx context.Context) (storetest.Counts, error) {
			c, err := db.Counts(ctx)
			return storetest.Counts(c), err
		},
		FlushTokenUses: db.FlushTokenUses,
	}
}

func openBolt(t *testing.T, now func() time.Time) storetest.Opened {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "herald.db"), bolt.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return storetest.Opened{
		Store: db,
		Counts: func(context.Context) (storetest.Counts, error) {
			c, err := db.Counts()
			return storetest.Counts(c), err
		},
		FlushTokenUses: func(context.Context) (int, error) { return db.FlushTokenUses() },
	}
}

func TestStoreConformance(t *testing.T) {
	storetest.Run(t, openForSuite)
}

// TestSearchSameAsBolt: the same content and the same searches give the
// same pages, cursors and change log on both stores.
func TestSearchSameAsBolt(t *testing.T) {
	storetest.CompareSearch(t, openBolt, openForSuite)
}
