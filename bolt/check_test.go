package bolt

import (
	"path/filepath"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"
)

// TestCheckTailMissingAndStray: a message above the merge watermark
// without its tail record and a stray tail record at or below the
// watermark leave terms_tail with exactly the number of keys the checker
// expects: counting alone would find nothing wrong, and the check must
// still report both.
func TestCheckTailMissingAndStray(t *testing.T) {
	manualMerges(t)
	path := filepath.Join(t.TempDir(), "herald.db")
	db0, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db0.Close()
	db := &testDB{DB: db0, Path: path}
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	m1 := mustCreateMessage(t, db, ada.ID, "apple")
	mergeAll(t, db.DB) // W = m1
	mustCreateMessage(t, db, ada.ID, "river")
	m3 := mustCreateMessage(t, db, ada.ID, "stone")
	err = db.writes.update(func(tx *bbolt.Tx) error {
		tail := tx.Bucket(bucketTermsTail)
		if err := tail.Delete(itob(m3.ID)); err != nil {
			return err
		}
		return tail.Put(itob(m1.ID), encodeTailRecord([]string{"apple"}))
	})
	if err != nil {
		t.Fatal(err)
	}
	problems, err := db.CheckInvariants()
	if err != nil {
		t.Fatal(err)
	}
	var missing, stray bool
	for _, p := range problems {
		missing = missing || strings.Contains(p, "missing from the search index's tail")
		stray = stray || strings.Contains(p, "at or below terms_merged")
	}
	if !missing || !stray {
		t.Errorf("CheckInvariants = %q, want both the missing tail record of %d and the stray one of %d", problems, m3.ID, m1.ID)
	}
}
