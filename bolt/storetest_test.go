package bolt_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"herald/bolt"
	"herald/storetest"
)

// OpenForSuite opens a bbolt store in t's temporary directory for the
// conformance suite, checked and closed at cleanup.
func openForSuite(t *testing.T, now func() time.Time) storetest.Opened {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "herald.db"), bolt.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Check(); err != nil {
			t.Errorf("bbolt check: %v", err)
		}
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
		FlushTokenUses:     func(context.Context) (int, error) { return db.FlushTokenUses() },
		IdempotencyRecords: func(context.Context) ([][]byte, error) { return db.IdempotencyRecords() },
	}
}

func TestStoreConformance(t *testing.T) {
	storetest.Run(t, openForSuite)
}
