package bolt

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// TestOverdueWrite: a client's write whose commit has not ended within
// the write timeout stops waiting, as it would for a disk that hangs
// under fsync. Queued behind a commit that does not end, it is taken out
// of the queue and refused as unavailable, and never done. In the commit
// under way, its outcome is unknown, and it is done once that commit
// ends. Reads go on meanwhile.
func TestOverdueWrite(t *testing.T) {
	ctx := context.Background()
	db, err := Open(filepath.Join(t.TempDir(), "herald.db"), Options{WriteTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	u := &model.User{Email: "ada@example.com", PasswordHash: fakePasswordHash}
	if _, err := db.CreateUser(ctx, u, tokenHash("ada"), defaultTTL, nil); err != nil {
		t.Fatal(err)
	}
	// answer waits for a write's answer, for longer than its timeout, and
	// lets the commits go on if none comes.
	answer := func(errs <-chan error, release chan struct{}) error {
		t.Helper()
		select {
		case err := <-errs:
			return err
		case <-time.After(30 * time.Second):
			close(release)
			t.Fatal("a write still waits for its commit after 30 s; its timeout is a second")
			return nil
		}
	}

	// A commit that does not end: the server's own work, which waits as
	// long as it takes.
	release, holding := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- db.writes.upkeep(func(*bbolt.Tx) error {
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
	created := make(chan error, 1)
	go func() {
		_, err := db.CreateMessage(ctx, model.ByUser(u.ID), "queued behind a commit that does not end")
		created <- err
	}()
	if err := answer(created, release); !errors.Is(err, model.ErrUnavailable) {
		t.Errorf("a create queued behind a commit that does not end = %v, want unavailable", err)
	}
	if _, _, err := db.Message(ctx, model.ByServer(), 1); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("reading while a commit does not end: %v, want message 1 not found", err)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}

	// A write in a commit that does not end, until its timeout has passed.
	release = make(chan struct{})
	updated := make(chan error, 1)
	go func() {
		updated <- db.writes.update(func(tx *bbolt.Tx) error {
			<-release
			b, err := tx.CreateBucketIfNotExists([]byte("overdue"))
			if err != nil {
				return err
			}
			return b.Put([]byte("write"), []byte("done"))
		})
	}()
	if err := answer(updated, release); !errors.Is(err, model.ErrOutcomeUnknown) {
		t.Errorf("a write in a commit that does not end = %v, want its outcome unknown", err)
	}
	close(release)
	// The next write's commit comes after that one.
	if _, err := db.CreateMessage(ctx, model.ByUser(u.ID), "after"); err != nil {
		t.Fatal(err)
	}
	err = db.bolt.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket([]byte("overdue")); b == nil || string(b.Get([]byte("write"))) != "done" {
			return errors.New("the write whose outcome was unknown was not done once its commit ended")
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	if c, err := db.Counts(); err != nil || c.Messages != 1 {
		t.Errorf("messages stored: %+v, %v; want the create after alone", c, err)
	}
}
