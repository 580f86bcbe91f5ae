package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"herald/bolt"
	"herald/model"
	"herald/push"
	"herald/storetest"
)

// TestMigratePush: herald migrate copies Web Push's key pair, the
// subscriptions with their IDs, the sender's position and its queue, so
// browsers subscribed before the copy are still pushed to, signed with
// the key they subscribed with, and nothing queued is lost.
func TestMigratePush(t *testing.T) {
	url := postgresCluster(t).Database(t)
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "herald.db")
	file, err := bolt.Open(path, bolt.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	var callers []model.Caller
	for _, h := range []string{"ada", "bob"} {
		u := &model.User{Email: h + "@example.com", Handle: h, PasswordHash: storetest.FakePasswordHash}
		if _, err := file.CreateUser(ctx, u, storetest.TokenHash("register "+h), time.Hour, nil); err != nil {
			t.Fatal(err)
		}
		callers = append(callers, model.ByUser(u.ID))
	}
	keys, err := file.VAPIDKeys(ctx, push.GenerateKeys)
	if err != nil {
		t.Fatal(err)
	}
	p256dh := append([]byte{4}, bytes.Repeat([]byte{1}, 64)...)
	for i, endpoint := range []string{"https://push.example/a", "https://push.example/b", "https://push.example/c"} {
		if _, err := file.SavePushSubscription(ctx, callers[i%2], &model.PushSubscription{Endpoint: endpoint, P256dh: p256dh, Auth: make([]byte, 16)}); err != nil {
			t.Fatal(err)
		}
	}
	// One deleted, so the copy must not give its ID out again.
	if err := file.DeletePushSubscription(ctx, callers[0], 3); err != nil {
		t.Fatal(err)
	}
	if err := file.QueuePushes(ctx, 0, 4, []model.PushNotice{{NotificationID: 4, UserID: 1, Kind: model.NotifyMention,
		Payload: []byte(`{"kind":"mention"}`), Expires: clock.Now().Add(model.PushTTL)}}); err != nil {
		t.Fatal(err)
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runArgs(t, "migrate", "--db", path, "--to", url)
	if code != 0 {
		t.Fatalf("migrate = %d\n%s%s", code, out, errOut)
	}
	if !regexp.MustCompile(`(?m)^  push subscriptions +2 +2$`).MatchString(out) {
		t.Errorf("migrate's report lacks 2 push subscriptions in both:\n%s", out)
	}
	_, db := openMigrated(t, path, url, clock.Now)
	got, err := db.VAPIDKeys(ctx, func() (model.VAPIDKeys, error) { return model.VAPIDKeys{}, context.Canceled })
	if err != nil || !bytes.Equal(got.Private, keys.Private) || !bytes.Equal(got.Public, keys.Public) {
		t.Errorf("PostgreSQL's key pair = %v; want the file's", err)
	}
	subs, err := db.PushSubscriptions(ctx, callers[0])
	if err != nil || len(subs) != 1 || subs[0].ID != 1 || subs[0].Endpoint != "https://push.example/a" || !bytes.Equal(subs[0].P256dh, p256dh) {
		t.Errorf("ada's subscriptions on PostgreSQL = %+v, %v", subs, err)
	}
	if pos, ok, err := db.PushPosition(ctx); pos != 4 || !ok || err != nil {
		t.Errorf("PostgreSQL's push position = %d, %v, %v; want 4", pos, ok, err)
	}
	due, err := db.ClaimPushes(ctx, clock.Now(), time.Minute, 10, nil)
	if err != nil || len(due) != 1 || due[0].SubscriptionID != 1 || string(due[0].Payload) != `{"kind":"mention"}` {
		t.Errorf("PostgreSQL's queue = %+v, %v; want the file's push to subscription 1", due, err)
	}
	s := &model.PushSubscription{Endpoint: "https://push.example/d", P256dh: p256dh, Auth: make([]byte, 16)}
	if _, err := db.SavePushSubscription(ctx, callers[1], s); err != nil || s.ID != 4 {
		t.Errorf("a new subscription on PostgreSQL = ID %d, %v; want 4, after the file's last", s.ID, err)
	}
}
