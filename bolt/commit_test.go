package bolt

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
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

// TestGroupCommit runs many concurrent writers and counts commits: they
// must share transactions (fewer commits than writes), every write must be
// on disk once it returned (reopen and look), and a writer refused inside a
// shared transaction must not undo the others — nor leave a change in the
// log, which holds one change per committed write, without a gap or a
// repeat, the same from memory and from disk.
func TestGroupCommit(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	bob, _ := mustCreateUser(t, db, "bob@example.com")
	victim := mustCreateMessage(t, db, ada.ID, "bob may not touch this")
	before := db.WriteStats()
	startHead, _, _ := db.ChangeHead(context.Background())

	const writers, perWriter = 32, 20
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created []*model.Message
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				if w%4 == 0 && i%2 == 0 {
					// Refused inside the transaction it shares with others.
					if _, err := db.DeleteMessage(context.Background(), victim.ID, model.ByUser(bob.ID), nil); !errors.Is(err, model.ErrForbidden) {
						t.Errorf("DeleteMessage(not owner) = %v, want ErrForbidden", err)
					}
					continue
				}
				m, err := db.CreateMessage(context.Background(), model.ByUser(ada.ID), fmt.Sprintf("writer %d message %d", w, i))
				if err != nil {
					t.Errorf("CreateMessage = %v", err)
					return
				}
				mu.Lock()
				created = append(created, m)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	stats := db.WriteStats()
	commits, ops := stats.Commits-before.Commits, stats.Ops-before.Ops
	// With HERALD_TEST_MERGE_POSTINGS small, the search index's merges
	// are writes too.
	if ops != uint64(len(created)) && (testMergePostings() == 0 || ops < uint64(len(created))) {
		t.Errorf("committed writes = %d, want %d", ops, len(created))
	}
	if commits >= ops {
		t.Errorf("%d writes took %d commits; concurrent writers should share fsyncs", ops, commits)
	}
	t.Logf("%d writes in %d commits", ops, commits)

	isCreated := make(map[uint64]bool, len(created))
	for _, m := range created {
		isCreated[m.ID] = true
	}
	logged, head, err := db.ChangesAfter(context.Background(), startHead, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if len(logged) != len(created) || head != startHead+uint64(len(created)) {
		t.Fatalf("%d changes up to head %d after %d creates from %d", len(logged), head, len(created), startHead)
	}
	for i, ch := range logged {
		if ch.Seq != startHead+uint64(i)+1 || ch.Kind != model.MessageCreated || !isCreated[ch.Message.ID] {
			t.Fatalf("change %d is %s: a gap, a repeat, or not one of the creates", i, changeString(ch))
		}
		delete(isCreated, ch.Message.ID)
	}

	// Reopen: everything acknowledged is there, and the log reads the same.
	reopen(t, db)
	for _, m := range append(created, victim) {
		got := mustMessage(t, db, m.ID)
		if got.Content != m.Content {
			t.Errorf("message %d after reopen = %q, want %q", m.ID, got.Content, m.Content)
		}
	}
	fromDisk, _, err := db.ChangesAfter(context.Background(), startHead, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if !equalStrings(changeStrings(fromDisk), changeStrings(logged)) {
		t.Error("the log read from disk differs from the one handed over in memory")
	}
}

// TestCommitterCloseRace closes the database while writers are queueing:
// every write either commits or gets an error, and nothing panics.
func TestCommitterCloseRace(t *testing.T) {
	for range 20 {
		path := filepath.Join(t.TempDir(), "race.db")
		db, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		u := &model.User{Email: "ada@example.com", PasswordHash: fakePasswordHash}
		if _, err := db.CreateUser(context.Background(), u, tokenHash("t"), time.Hour, nil); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					if _, err := db.CreateMessage(context.Background(), model.ByUser(u.ID), "racing the close"); err != nil {
						return
					}
				}
			}()
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
}

// TestWritePanicIsAnError: a panic inside a write function fails that write
// only; the committer, and the writes sharing its transaction, go on.
func TestWritePanicIsAnError(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	err := db.writes.update(func(*bbolt.Tx) error { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("update(panicking) = %v, want an error naming the panic", err)
	}
	mustCreateMessage(t, db, ada.ID, "the committer still works")
}

// TestCommitFoundOnDiskAfterFailing: a commit that failed but is visible
// to readers after all (its meta page went out before its sync failed)
// stops the store's writes, and Ping says so, rather than let the change
// feed skip it and clients told of a failure write again; a failure that
// left nothing behind stops nothing.
func TestCommitFoundOnDiskAfterFailing(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	var current int
	_ = db.bolt.View(func(tx *bbolt.Tx) error { current = tx.ID(); return nil })
	db.checkRolledBack(current+1, errors.New("rolled back"))
	if _, err := db.CreateMessage(ctx, model.ByUser(ada.ID), "still writing"); err != nil {
		t.Fatalf("a failure that left nothing behind: %v", err)
	}
	_ = db.bolt.View(func(tx *bbolt.Tx) error { current = tx.ID(); return nil })
	db.checkRolledBack(current, errors.New("sync failed after the meta page"))
	if _, err := db.CreateMessage(ctx, model.ByUser(ada.ID), "no more"); !errors.Is(err, errBroken) {
		t.Errorf("a write after a failed commit reached the disk: %v, want errBroken", err)
	}
	if err := db.Ping(ctx); !errors.Is(err, errBroken) {
		t.Errorf("Ping = %v, want errBroken", err)
	}
	if _, err := db.UserByEmail(ctx, "ada@example.com"); err != nil {
		t.Errorf("a read after writes stopped: %v", err)
	}
	db.broken.Store(nil) // so the test's cleanup can check and close
}
