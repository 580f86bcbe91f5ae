package bolt

import (
	"context"
	"fmt"
	"io"
	"os"

	bbolt "go.etcd.io/bbolt"
)

// Offline tools: check, backup and compact work on a database no server has
// open. They open it read-only, so they never upgrade or repair anything,
// and a running server's lock makes them fail fast instead of reading a
// file that is being written.

// Snapshot is a read-only view of a database file for the offline tools.
type Snapshot struct {
	bolt *bbolt.DB
}

// OpenSnapshot opens path read-only. Errors: ErrLocked when a server holds
// the file; ErrNotHerald when it holds no Herald database (an empty file
// included: bbolt would try to write a new database into it); a plain
// error when the file does not exist.
func OpenSnapshot(path string) (*Snapshot, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() == 0 {
		return nil, &os.PathError{Op: "open", Path: path, Err: ErrNotHerald}
	}
	bdb, err := openBolt(path, &bbolt.Options{ReadOnly: true, Timeout: DefaultLockTimeout})
	if err != nil {
		return nil, err
	}
	err = bdb.View(func(tx *bbolt.Tx) error {
		if fresh, err := heraldFile(tx); fresh || err != nil {
			return ErrNotHerald // an empty file holds no Herald data either
		}
		return nil
	})
	if err != nil {
		_ = bdb.Close()
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return &Snapshot{bolt: bdb}, nil
}

// Close releases the file.
func (s *Snapshot) Close() error { return s.bolt.Close() }

// Check reports every problem in the file: bbolt's page structure first,
// then every Herald invariant (see DB.CheckInvariants). An empty list means
// the database is sound.
func (s *Snapshot) Check() ([]string, error) {
	var problems []string
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			problems = append(problems, "bbolt: "+err.Error())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	db := &DB{bolt: s.bolt}
	more, err := db.CheckInvariants()
	if err != nil {
		return nil, err
	}
	return append(problems, more...), nil
}

// WriteTo writes a consistent copy of the database, as of one read
// transaction, to w.
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) { return writeSnapshot(s.bolt, w) }

// WriteBackup streams a consistent snapshot of the live database to w from
// one read transaction: writers go on meanwhile, and the copy holds exactly
// the writes committed before it began.
func (db *DB) WriteBackup(_ context.Context, w io.Writer) (int64, error) {
	return writeSnapshot(db.bolt, w)
}

func writeSnapshot(bdb *bbolt.DB, w io.Writer) (int64, error) {
	var n int64
	err := bdb.View(func(tx *bbolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}

// Compact writes a compacted copy of the snapshot to a new file at out: a
// bbolt file never shrinks by itself, and the copy leaves out the pages
// that deletions freed. It refuses to overwrite an existing file.
func (s *Snapshot) Compact(out string) error {
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("%s already exists; compact writes a new file", out)
	}
	dst, err := bbolt.Open(out, 0o600, &bbolt.Options{Timeout: DefaultLockTimeout, NoSync: true})
	if err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	// NoSync while copying, one sync at the end: a half-written copy is
	// worthless either way.
	err = bbolt.Compact(dst, s.bolt, 64<<20)
	if err == nil {
		dst.NoSync = false
		err = dst.Sync()
	}
	if closeErr := dst.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		_ = os.Remove(out)
		return fmt.Errorf("compact into %s: %w", out, err)
	}
	return nil
}

// Counts is DB.Counts on the snapshot.
func (s *Snapshot) Counts() (Counts, error) { return (&DB{bolt: s.bolt}).Counts() }
