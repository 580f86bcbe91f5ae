package bolt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"herald/storetest"
)

// openForSuite opens a bbolt store in t's temporary directory for the
// conformance suite, checked and closed at cleanup.
func openForSuite(t *testing.T, now func() time.Time) storetest.Opened {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "herald.db"), Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Check(); err != nil {
			t.Errorf("bbolt check: %v", err)
		}
		checkIndexes(t, db)
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
		IdempotencyRecords: func(context.Context) ([][]byte, error) { return db.IdempotencyRecords() },
		Copy: func(ctx context.Context) ([]byte, error) {
			dir := t.TempDir()
			backup, err := os.Create(filepath.Join(dir, "backup.db"))
			if err != nil {
				return nil, err
			}
			_, err = db.WriteBackup(ctx, backup)
			if err := errors.Join(err, backup.Close()); err != nil {
				return nil, err
			}
			snap, err := OpenSnapshot(backup.Name())
			if err != nil {
				return nil, err
			}
			defer snap.Close()
			if err := snap.Compact(filepath.Join(dir, "compacted.db")); err != nil {
				return nil, err
			}
			return os.ReadFile(filepath.Join(dir, "compacted.db"))
		},
	}
}

func TestStoreConformance(t *testing.T) {
	storetest.Run(t, openForSuite)
}
