package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"herald/model"
)

// Web Push: the key pair, the subscriptions, the sender's queue.

// pushSub is a subscription to endpoint with made-up keys.
func pushSub(endpoint string) *model.PushSubscription {
	p := bytes.Repeat([]byte{7}, 65)
	p[0] = 4
	return &model.PushSubscription{Endpoint: endpoint, P256dh: p, Auth: bytes.Repeat([]byte{9}, 16)}
}

func (e *env) subscribe(by model.Caller, endpoint string) (*model.PushSubscription, bool) {
	e.t.Helper()
	s := pushSub(endpoint)
	created, err := e.Store.SavePushSubscription(e.ctx(), by, s)
	if err != nil {
		e.t.Fatalf("SavePushSubscription(%s) = %v", endpoint, err)
	}
	return s, created
}

func (e *env) pushEndpoints(by model.Caller) []string {
	e.t.Helper()
	subs, err := e.Store.PushSubscriptions(e.ctx(), by)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, s := range subs {
		out = append(out, s.Endpoint)
	}
	return out
}

// testPushKeys: the key pair is made once, by the first caller, and every
// caller after (or at the same time) gets that one.
func testPushKeys(e *env) {
	t := e.t
	made := 0
	var mu sync.Mutex
	generate := func() (model.VAPIDKeys, error) {
		mu.Lock()
		made++
		n := made
		mu.Unlock()
		return model.VAPIDKeys{Private: bytes.Repeat([]byte{byte(n)}, 32), Public: bytes.Repeat([]byte{byte(n)}, 65)}, nil
	}
	got := make([]model.VAPIDKeys, 4)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			k, err := e.Store.VAPIDKeys(e.ctx(), generate)
			if err != nil {
				t.Error(err)
			}
			got[i] = k
		})
	}
	wg.Wait()
	for _, k := range got[1:] {
		if !bytes.Equal(k.Private, got[0].Private) || !bytes.Equal(k.Public, got[0].Public) || len(k.Private) != 32 {
			t.Fatalf("callers at once got different key pairs: %v and %v", k.Public[:2], got[0].Public[:2])
		}
	}
	again, err := e.Store.VAPIDKeys(e.ctx(), func() (model.VAPIDKeys, error) {
		return model.VAPIDKeys{}, errors.New("asked to make a key pair again")
	})
	if err != nil || !bytes.Equal(again.Public, got[0].Public) {
		t.Errorf("VAPIDKeys later = %v, %v; want the stored pair", again.Public[:2], err)
	}
}

// testPushSubscriptions: new, updated, moved between accounts, listed
// newest first, capped per account, deleted by their owner only and with
// the account.
func testPushSubscriptions(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, adaBy := e.person("ada@example.com", "ada")
	_, bobBy := e.person("bob@example.com", "bob")
	phone, created := e.subscribe(adaBy, "https://push.example/phone")
	if !created || phone.ID == 0 || phone.UserID != ada.ID || !phone.CreatedAt.Equal(e.clock.Now().UTC().Truncate(time.Microsecond)) || !phone.LastSuccessAt.IsZero() {
		t.Errorf("a new subscription = %+v, created %v", phone, created)
	}
	e.clock.Add(time.Second)
	laptop, _ := e.subscribe(adaBy, "https://push.example/laptop")
	e.clock.Add(time.Second)
	again := pushSub("https://push.example/phone")
	again.Auth = bytes.Repeat([]byte{1}, 16)
	again.ExpirationTime = e.clock.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	created, err := e.Store.SavePushSubscription(ctx, adaBy, again)
	if err != nil || created || again.ID != phone.ID || !again.CreatedAt.Equal(phone.CreatedAt) {
		t.Errorf("the same endpoint again = %+v, created %v, %v; want subscription %d updated", again, created, err, phone.ID)
	}
	if got := e.pushEndpoints(adaBy); fmt.Sprint(got) != "[https://push.example/laptop https://push.example/phone]" {
		t.Errorf("ada's subscriptions = %v, want newest first", got)
	}
	subs, _ := e.Store.PushSubscriptions(ctx, adaBy)
	for _, s := range subs {
		if s.ID == phone.ID && (!bytes.Equal(s.Auth, again.Auth) || !s.ExpirationTime.Equal(again.ExpirationTime)) {
			t.Errorf("the updated subscription reads %+v", s)
		}
	}
	moved, created := e.subscribe(bobBy, "https://push.example/laptop")
	if !created || moved.ID != laptop.ID && moved.UserID == ada.ID {
		t.Errorf("ada's endpoint registered by bob = %+v, created %v; want it moved to bob", moved, created)
	}
	if got := e.pushEndpoints(adaBy); fmt.Sprint(got) != "[https://push.example/phone]" {
		t.Errorf("ada's subscriptions after bob took the laptop's = %v", got)
	}
	if err := e.Store.DeletePushSubscription(ctx, adaBy, moved.ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("ada deleting bob's subscription = %v, want ErrNotFound", err)
	}
	if err := e.Store.DeletePushSubscription(ctx, bobBy, moved.ID); err != nil {
		t.Errorf("bob deleting his subscription = %v", err)
	}
	if got := e.pushEndpoints(bobBy); len(got) != 0 {
		t.Errorf("bob's subscriptions after deleting = %v", got)
	}
	for i := 2; i <= model.MaxPushSubscriptions; i++ {
		e.subscribe(adaBy, fmt.Sprintf("https://push.example/%d", i))
	}
	_, err = e.Store.SavePushSubscription(ctx, adaBy, pushSub("https://push.example/eleventh"))
	var refusal *model.Error
	if !errors.Is(err, model.ErrConflict) || !errors.As(err, &refusal) || refusal.Field != "endpoint" {
		t.Errorf("an 11th subscription = %v, want ErrConflict naming endpoint", err)
	}
	if _, err := e.Store.SavePushSubscription(ctx, adaBy, pushSub("https://push.example/phone")); err != nil {
		t.Errorf("updating a subscription at the limit = %v", err)
	}
	if err := e.Store.DeleteAccount(ctx, adaBy); err != nil {
		t.Fatal(err)
	}
	// The endpoint is free again: bob can take it as a new one.
	if s, created := e.subscribe(bobBy, "https://push.example/phone"); !created || s.ID == phone.ID {
		t.Errorf("a deleted account's endpoint registered again = %+v, created %v; want a new subscription", s, created)
	}
}

// testPushQueue: the sender's position moves with its queue, by compare
// and set; a queued push goes to every subscription of its account;
// claims are leased; outcomes delete, retry or drop; a subscription's
// deletion or move drops its queue.
func testPushQueue(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, adaBy := e.person("ada@example.com", "ada")
	bob, bobBy := e.person("bob@example.com", "bob")
	_, carolBy := e.person("carol@example.com", "carol")
	if pos, ok, err := e.Store.PushPosition(ctx); pos != 0 || ok || err != nil {
		t.Fatalf("PushPosition on a new store = %d, %v, %v; want none", pos, ok, err)
	}
	phone, _ := e.subscribe(adaBy, "https://push.example/ada-phone")
	laptop, _ := e.subscribe(adaBy, "https://push.example/ada-laptop")
	e.subscribe(bobBy, "https://push.example/bob")
	now := e.clock.Now().UTC().Truncate(time.Microsecond)
	notices := []model.PushNotice{
		{NotificationID: 5, UserID: ada.ID, Kind: model.NotifyMention, Payload: []byte(`{"n":5}`), Expires: now.Add(model.PushTTL)},
		{NotificationID: 6, UserID: bob.ID, Kind: model.NotifyReply, Payload: []byte(`{"n":6}`), Expires: now.Add(model.PushTTL)},
	}
	if err := e.Store.QueuePushes(ctx, 0, 7, notices); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.QueuePushes(ctx, 0, 9, nil); !errors.Is(err, model.ErrConflict) {
		t.Errorf("QueuePushes from a position passed = %v, want ErrConflict", err)
	}
	if pos, ok, err := e.Store.PushPosition(ctx); pos != 7 || !ok || err != nil {
		t.Errorf("PushPosition = %d, %v, %v; want 7", pos, ok, err)
	}
	const lease = time.Minute
	due, err := e.Store.ClaimPushes(ctx, now, lease, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]*model.PushDelivery)
	for _, d := range due {
		got[fmt.Sprintf("%d→%s", d.NotificationID, d.Subscription.Endpoint)] = d
		if d.SubscriptionID != d.Subscription.ID || len(d.Subscription.P256dh) != 65 || len(d.Subscription.Auth) != 16 || !d.Expires.Equal(now.Add(model.PushTTL)) {
			t.Errorf("a claimed delivery = %+v", d)
		}
	}
	want := []string{"5→https://push.example/ada-phone", "5→https://push.example/ada-laptop", "6→https://push.example/bob"}
	for _, k := range want {
		if got[k] == nil {
			t.Errorf("claimed %v, want %v", len(got), want)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("claimed %d deliveries, want %d", len(got), len(want))
	}
	if d := got["5→https://push.example/ada-phone"]; d.Kind != model.NotifyMention || string(d.Payload) != `{"n":5}` || d.Attempts != 0 {
		t.Errorf("delivery of notification 5 = %+v", d)
	}
	if again, _ := e.Store.ClaimPushes(ctx, now, lease, 10, nil); len(again) != 0 {
		t.Errorf("claimed again within the lease: %d deliveries", len(again))
	}
	if again, _ := e.Store.ClaimPushes(ctx, now.Add(lease), lease, 1, nil); len(again) != 1 {
		t.Errorf("claimed after the lease, at most 1: %d deliveries, want 1", len(again))
	}
	// Outcomes.
	at := now.Add(2 * lease)
	if err := e.Store.FinishPush(ctx, got["5→https://push.example/ada-phone"], model.PushDelivered, at); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.FinishPush(ctx, got["5→https://push.example/ada-laptop"], model.PushRetry, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.FinishPush(ctx, got["6→https://push.example/bob"], model.PushSubscriptionGone, at); err != nil {
		t.Fatal(err)
	}
	subs, _ := e.Store.PushSubscriptions(ctx, adaBy)
	for _, s := range subs {
		if s.ID == phone.ID && !s.LastSuccessAt.Equal(at) {
			t.Errorf("the phone's lastSuccessAt = %v, want %v", s.LastSuccessAt, at)
		}
	}
	if got := e.pushEndpoints(bobBy); len(got) != 0 {
		t.Errorf("bob's subscriptions after the push service said it was gone = %v", got)
	}
	if d, _ := e.Store.ClaimPushes(ctx, at.Add(time.Hour-time.Second), lease, 10, nil); len(d) != 0 {
		t.Errorf("claimed before the retry's time: %d", len(d))
	}
	d, _ := e.Store.ClaimPushes(ctx, at.Add(time.Hour), lease, 10, nil)
	if len(d) != 1 || d[0].SubscriptionID != laptop.ID || d[0].Attempts != 1 {
		t.Fatalf("claimed at the retry's time = %+v, want the laptop's, 1 attempt", d)
	}
	if err := e.Store.FinishPush(ctx, d[0], model.PushDropped, at); err != nil {
		t.Fatal(err)
	}
	if d, _ := e.Store.ClaimPushes(ctx, at.Add(48*time.Hour), lease, 10, nil); len(d) != 0 {
		t.Errorf("claimed after every delivery finished: %d", len(d))
	}
	// Deleting or moving a subscription drops its queue.
	notices = []model.PushNotice{{NotificationID: 9, UserID: ada.ID, Kind: model.NotifyReply, Payload: []byte(`{}`), Expires: now.Add(model.PushTTL)}}
	if err := e.Store.QueuePushes(ctx, 7, 10, notices); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.DeletePushSubscription(ctx, adaBy, phone.ID); err != nil {
		t.Fatal(err)
	}
	e.subscribe(carolBy, "https://push.example/ada-laptop")
	if d, _ := e.Store.ClaimPushes(ctx, at.Add(48*time.Hour), lease, 10, nil); len(d) != 0 {
		t.Errorf("claimed %d deliveries of subscriptions deleted or moved since they were queued, want none", len(d))
	}
}

// testPushClaimsApart: senders claiming at once never take the same
// delivery, so even two instances that both believe they lead send each
// push once.
func testPushClaimsApart(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, adaBy := e.person("ada@example.com", "ada")
	for i := range 5 {
		e.subscribe(adaBy, fmt.Sprintf("https://push.example/%d", i))
	}
	now := e.clock.Now()
	var notices []model.PushNotice
	for id := uint64(1); id <= 8; id++ {
		notices = append(notices, model.PushNotice{NotificationID: id, UserID: ada.ID, Kind: model.NotifyMention, Payload: []byte("{}"), Expires: now.Add(model.PushTTL)})
	}
	if err := e.Store.QueuePushes(ctx, 0, 8, notices); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := make(map[[2]uint64]int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				due, err := e.Store.ClaimPushes(ctx, now, time.Minute, 3, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if len(due) == 0 {
					return
				}
				mu.Lock()
				for _, d := range due {
					seen[[2]uint64{d.NotificationID, d.SubscriptionID}]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 40 {
		t.Errorf("%d deliveries claimed, want 40", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("delivery %v claimed %d times", k, n)
		}
	}
}

// testPushClaimSkipsBusy: a claim leaves out the deliveries to the push
// services it is told are busy, matched by model.PushOrigin alike on
// every store (ports, queries and paths included).
func testPushClaimSkipsBusy(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, adaBy := e.person("ada@example.com", "ada")
	endpoints := []string{"https://a.example/1", "https://a.example:8443/2", "https://b.example?3", "https://b.example/x/4", "https://c.example"}
	for _, ep := range endpoints {
		e.subscribe(adaBy, ep)
	}
	now := e.clock.Now()
	if err := e.Store.QueuePushes(ctx, 0, 1, []model.PushNotice{{NotificationID: 1, UserID: ada.ID, Kind: model.NotifyReply,
		Payload: []byte("{}"), Expires: now.Add(model.PushTTL)}}); err != nil {
		t.Fatal(err)
	}
	due, err := e.Store.ClaimPushes(ctx, now, time.Minute, 10, []string{"https://a.example", "https://b.example", "https://c.example"})
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0].Subscription.Endpoint != "https://a.example:8443/2" {
		var got []string
		for _, d := range due {
			got = append(got, d.Subscription.Endpoint)
		}
		t.Errorf("claimed %v with a.example, b.example and c.example busy; want only a.example:8443's", got)
	}
	for _, ep := range endpoints {
		if o := model.PushOrigin(ep); !strings.HasPrefix(ep, o) || strings.ContainsAny(strings.TrimPrefix(o, "https://"), "/?#") {
			t.Errorf("PushOrigin(%s) = %s", ep, o)
		}
	}
	if due, _ := e.Store.ClaimPushes(ctx, now, time.Minute, 10, []string{}); len(due) != 4 {
		t.Errorf("claimed %d with none busy, want the 4 left", len(due))
	}
}
