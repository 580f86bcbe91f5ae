package bolt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// IdempotencyRecords returns every idempotency record's key and value as
// stored, for the conformance suite.
func (db *DB) IdempotencyRecords() ([][]byte, error) {
	var recs [][]byte
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketIdempotency).ForEach(func(k, v []byte) error {
			recs = append(recs, append(bytes.Clone(k), v...))
			return nil
		})
	})
	return recs, err
}

// layout7Ada is the hash of a token ada got when bolt/testdata/layout7.db
// was written (see layout7Written), valid for 30 days.
var layout7Ada = model.TokenHash(sha256.Sum256([]byte("herald_aYkc0Raok8WZsB4Owvl8B9V4dw8KpVTVjLxGCMOdBucwSYg5w")))

// TestUpgradeFromLayout7Idempotency: a file the landed release wrote opens
// in layout 8, once and logged, with empty idempotency buckets its check
// accepts; its accounts' tokens then create with keys as on a new file, and
// an older layout 7 Herald would refuse it.
func TestUpgradeFromLayout7Idempotency(t *testing.T) {
	path := fixtureCopy(t, "layout7.db")
	clock := &testClock{now: layout7Written.Add(time.Hour)}
	var log bytes.Buffer
	db, err := Open(path, Options{Now: clock.Now, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if got := log.String(); strings.Count(got, "upgraded to layout 8") != 1 {
		t.Errorf("first open logged %q, want the upgrade to layout 8 once", got)
	}
	checkIndexes(t, db)
	key := model.IdempotencyKey{ID: sha256.Sum256([]byte("k")), Fingerprint: sha256.Sum256([]byte("f"))}
	first, err := db.CreateMessageWithKey(context.Background(), model.ByToken(layout7Ada), "after the upgrade", key)
	if err != nil {
		t.Fatal(err)
	}
	again, err := db.CreateMessageWithKey(context.Background(), model.ByToken(layout7Ada), "after the upgrade", key)
	if err != nil || !reflect.DeepEqual(*again, *first) {
		t.Errorf("retry after the upgrade = %+v, %v; want %+v", again, err, first)
	}
	checkIndexes(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	log.Reset()
	db, err = Open(path, Options{Now: clock.Now, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log.String(), "upgrad") {
		t.Errorf("second open logged %q, want no upgrade", log.String())
	}
	snap, err := OpenSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	err = snap.bolt.View(func(tx *bbolt.Tx) error {
		if got := btoi(tx.Bucket(bucketMeta).Get(metaLayout)); got != currentLayout {
			t.Errorf("layout %d after the upgrade, want %d: a layout 7 Herald must refuse the file", got, currentLayout)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCheckIdempotency: the invariant walk finds a record whose account
// is gone, one that names a message never given out, one missing from
// the time index, and a time index entry without its record.
func TestCheckIdempotency(t *testing.T) {
	// Not mustOpen's database, which its cleanup checks: this one is
	// broken on purpose.
	db, err := Open(filepath.Join(t.TempDir(), "herald.db"), Options{Now: (&testClock{now: testEpoch}).Now})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ada := &model.User{Email: "ada@example.com", PasswordHash: "hash"}
	if _, err := db.CreateUser(context.Background(), ada, tokenHash("ada"), time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	key := model.IdempotencyKey{ID: sha256.Sum256([]byte("k")), Fingerprint: sha256.Sum256([]byte("f"))}
	m, err := db.CreateMessageWithKey(context.Background(), model.ByUser(ada.ID), "kept", key)
	if err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, db)
	record := func(userID, messageID uint64, name string) *model.IdempotencyRecord {
		return &model.IdempotencyRecord{UserID: userID, Key: model.IdempotencyKey{ID: sha256.Sum256([]byte(name))},
			ResourceID: messageID, CreatedAt: db.clock()}
	}
	err = db.bolt.Update(func(tx *bbolt.Tx) error {
		if err := putIdempotency(tx, record(ada.ID+1, m.ID, "of nobody")); err != nil {
			return err
		}
		if err := putIdempotency(tx, record(ada.ID, m.ID+1, "of no message")); err != nil {
			return err
		}
		unindexed := record(ada.ID, m.ID, "unindexed")
		if err := putIdempotency(tx, unindexed); err != nil {
			return err
		}
		if err := tx.Bucket(bucketIdempotencyByTime).Delete(idempotencyTimeKey(unindexed)); err != nil {
			return err
		}
		return tx.Bucket(bucketIdempotencyByTime).Put(idempotencyTimeKey(record(ada.ID, m.ID, "index alone")), nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	problems, err := db.CheckInvariants()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("idempotency: a record of account %d names message %d, never given out", ada.ID, m.ID+1),
		fmt.Sprintf("idempotency: a record of account %d is missing from the time index", ada.ID),
		fmt.Sprintf("idempotency: a record of account %d, which does not exist", ada.ID+1),
		fmt.Sprintf("idempotency_by_time: an entry of account %d at %s has no record of that time", ada.ID, db.clock().Format(time.RFC3339Nano)),
	}
	slices.Sort(problems)
	slices.Sort(want)
	if !slices.Equal(problems, want) {
		t.Errorf("problems\n%s\nwant\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
}
