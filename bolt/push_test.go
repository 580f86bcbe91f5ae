package bolt

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// testdata/layout10.db was written through the API of main at 874f3bb,
// the last release of layout 10, on layout10Written: ada@example.com (1),
// bob@example.com (2) and carol@example.com (3); ada posted 1 ("hello
// @bob"), bob answered it with 2 ("hi @ada and @carol"), carol posted 3.
var layout10Written = time.Date(2026, 11, 28, 11, 0, 0, 0, time.UTC)

// TestUpgradeFromLayout10: a file of layout 10 opens as layout 11, once
// and logged, with the push buckets made and everything else as it was;
// push subscriptions then work on it, the sender starts with no position,
// and the check finds nothing wrong. A second open upgrades nothing.
func TestUpgradeFromLayout10(t *testing.T) {
	ctx := context.Background()
	path := fixtureCopy(t, "layout10.db")
	var log bytes.Buffer
	clock := &testClock{now: layout10Written.Add(time.Hour)}
	db, err := Open(path, Options{Now: clock.Now, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if got := log.String(); strings.Count(got, "upgraded to layout 11") != 1 {
		t.Errorf("the open logged %q, want the upgrade to layout 11 once", got)
	}
	for id, handle := range map[uint64]string{1: "ada", 2: "bob", 3: "carol"} {
		u, err := db.UserByID(ctx, id)
		if err != nil || u.Handle != handle {
			t.Errorf("account %d after the upgrade = %+v, %v", id, u, err)
		}
	}
	p, err := db.Notifications(ctx, model.ByUser(1), model.NotificationQuery{})
	if err != nil || len(p.Items) != 1 || p.Items[0].MessageID != 2 {
		t.Errorf("ada's notifications after the upgrade = %+v, %v; want bob's reply", p, err)
	}
	if pos, ok, err := db.PushPosition(ctx); ok || pos != 0 || err != nil {
		t.Errorf("PushPosition after the upgrade = %d, %v, %v; want none", pos, ok, err)
	}
	sub := &model.PushSubscription{Endpoint: "https://push.example/1", P256dh: append([]byte{4}, make([]byte, 64)...), Auth: make([]byte, 16)}
	if created, err := db.SavePushSubscription(ctx, model.ByUser(2), sub); err != nil || !created {
		t.Fatalf("a subscription on the upgraded file: %v, %v", created, err)
	}
	head, _, _ := db.ChangeHead(ctx)
	if err := db.QueuePushes(ctx, 0, head, []model.PushNotice{{NotificationID: head, UserID: 2, Kind: model.NotifyMention,
		Payload: []byte("{}"), Expires: clock.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	if problems, err := db.CheckInvariants(); err != nil || len(problems) > 0 {
		t.Errorf("check after the upgrade: %v, %v", problems, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	readFile(t, path, func(tx *bbolt.Tx) error {
		if got := btoi(tx.Bucket(bucketMeta).Get(metaLayout)); got != 11 {
			t.Errorf("layout %d after the upgrade, want 11", got)
		}
		return nil
	})
	log.Reset()
	db, err = Open(path, Options{Now: clock.Now, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if strings.Contains(log.String(), "upgraded") {
		t.Errorf("the second open logged %q, want no upgrade", log.String())
	}
}

// TestCheckFindsPushProblems: the check reports a subscription its
// indexes miss and a queued push to no subscription.
func TestCheckFindsPushProblems(t *testing.T) {
	db := mustOpen(t)
	u, h := mustCreateUser(t, db, "ada@example.com")
	sub := &model.PushSubscription{Endpoint: "https://push.example/1", P256dh: append([]byte{4}, make([]byte, 64)...), Auth: make([]byte, 16)}
	if _, err := db.SavePushSubscription(context.Background(), model.ByToken(h), sub); err != nil {
		t.Fatal(err)
	}
	if problems, _ := db.CheckInvariants(); len(problems) != 0 {
		t.Fatalf("check of a sound file: %v", problems)
	}
	broken := func(fn func(tx *bbolt.Tx) error) []string {
		if err := db.bolt.Update(fn); err != nil {
			t.Fatal(err)
		}
		problems, _ := db.CheckInvariants()
		return problems
	}
	got := broken(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketPushSubsByEndpoint).Delete([]byte(sub.Endpoint))
	})
	if len(got) != 1 || !strings.Contains(got[0], "push_subs_by_endpoint") {
		t.Errorf("check with an endpoint index entry missing = %v", got)
	}
	got = broken(func(tx *bbolt.Tx) error {
		if err := tx.Bucket(bucketPushSubsByEndpoint).Put([]byte(sub.Endpoint), itob(sub.ID)); err != nil {
			return err
		}
		return tx.Bucket(bucketPushPending).Put(compositeKey(9, itob(99)), []byte("{}"))
	})
	if len(got) != 1 || !strings.Contains(got[0], "push_pending") {
		t.Errorf("check with a delivery to no subscription = %v", got)
	}
	_ = broken(func(tx *bbolt.Tx) error { return tx.Bucket(bucketPushPending).Delete(compositeKey(9, itob(99))) })
	_ = u
}
