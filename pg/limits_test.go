package pg_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"herald/auth"
	heraldhttp "herald/http"
	"herald/pg"
	"herald/storetest"
)

// The store keeps the limits http/ checks it for.
var _ heraldhttp.SharedLimits = (*pg.DB)(nil)

// TestLimitsClockSteppingBack: a clock stepping back does not lengthen a
// penalty; spends count from the latest time the instance has seen, as
// the limits kept in memory do (auth.Limiter).
func TestLimitsClockSteppingBack(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	db, _ := open(t, pg.Options{Now: clock.Now})
	l := db.Limiter("logins", auth.Rate{Burst: 2, Every: 5 * time.Minute})
	for range 2 {
		if ok, _ := l.Spend(ctx, "ada"); !ok {
			t.Fatal("a spend within the burst refused")
		}
	}
	if ok, _ := l.Spend(ctx, "ada"); ok {
		t.Fatal("a spend beyond the burst passed")
	}
	clock.Add(6 * time.Minute)
	if ok, _ := l.Spend(ctx, "bob"); !ok {
		t.Fatal("another key refused")
	}
	clock.Add(-2 * time.Minute) // four minutes after ada's spends
	if ok, wait := l.Spend(ctx, "ada"); !ok {
		t.Errorf("six minutes after the spends, the clock stepped back two: refused for %v; want a pass, as before the step", wait)
	}
}

// TestLimitsShared: two instances on one database count one budget per
// key: what one spends the other cannot, a refund through either gives
// one back, keys and limiters are apart, and concurrent spends through
// both pass exactly the burst.
func TestLimitsShared(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	a, url := open(t, pg.Options{Now: clock.Now})
	b := openURL(t, url, pg.Options{Now: clock.Now})
	rate := auth.Rate{Burst: 3, Every: time.Minute}
	la, lb := a.Limiter("writes", rate), b.Limiter("writes", rate)
	for i, l := range []auth.Spender{la, lb, la} {
		if ok, _ := l.Spend(ctx, "ada"); !ok {
			t.Fatalf("spend %d of a burst of 3 refused", i+1)
		}
	}
	for _, l := range []auth.Spender{la, lb} {
		ok, wait := l.Spend(ctx, "ada")
		if ok || wait != time.Minute {
			t.Errorf("a fourth spend = %v, retry after %v; want refused for a minute", ok, wait)
		}
	}
	if ok, _ := lb.Spend(ctx, "bob"); !ok {
		t.Error("another key shares ada's budget")
	}
	if ok, _ := b.Limiter("logins", rate).Spend(ctx, "ada"); !ok {
		t.Error("another limiter shares the writes' budget")
	}
	lb.Refund(ctx, "ada")
	if ok, _ := la.Spend(ctx, "ada"); !ok {
		t.Error("a refund through b did not give a back a spend")
	}
	clock.Add(30 * time.Second)
	if ok, wait := la.Spend(ctx, "ada"); ok || wait != 30*time.Second {
		t.Errorf("half an interval later: %v, retry after %v; want refused for 30s", ok, wait)
	}
	clock.Add(30 * time.Second)
	if ok, _ := lb.Spend(ctx, "ada"); !ok {
		t.Error("an interval later, still refused")
	}

	// The rows of full buckets go; the rest stay.
	clock.Add(10 * time.Minute)
	if ok, _ := la.Spend(ctx, "carol"); !ok {
		t.Fatal("carol refused")
	}
	if n, err := a.SweepLimits(ctx); err != nil || n != 3 {
		t.Errorf("SweepLimits = %d, %v; want 3 (ada's, bob's, the logins')", n, err)
	}

	var passed atomic.Int32
	var wg sync.WaitGroup
	for i := range 40 {
		l := la
		if i%2 == 1 {
			l = lb
		}
		wg.Go(func() {
			if ok, _ := l.Spend(ctx, "race"); ok {
				passed.Add(1)
			}
		})
	}
	wg.Wait()
	if passed.Load() != int32(rate.Burst) {
		t.Errorf("%d of 40 concurrent spends through two instances passed, want %d", passed.Load(), rate.Burst)
	}
}

// Spends sent together count as they would one by one: a key's spends
// in one batch take what its bucket has, in the order they came, refused
// ones are told when the next event is back, and other keys are apart.
func TestLimitsSpentTogether(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clock := storetest.NewClock()
	db, _ := open(t, pg.Options{Now: clock.Now})
	rate := auth.Rate{Burst: 3, Every: time.Minute}
	writes, logins := db.Limiter("writes", rate), db.Limiter("logins", rate)
	type spend struct {
		l    auth.Spender
		key  string
		pass bool
		wait time.Duration
	}
	// together spends hot n times and n cold keys once, in one batch, and
	// returns how many of hot's passed and the waits of those refused.
	together := func(round, n int) (passed int, waits []time.Duration) {
		t.Helper()
		queued, release := db.HoldSpends()
		var spends []*spend
		for i := range n {
			spends = append(spends, &spend{l: writes, key: "hot"}, &spend{l: logins, key: fmt.Sprintf("cold%d-%d", round, i)})
		}
		var wg sync.WaitGroup
		for _, s := range spends {
			wg.Go(func() { s.pass, s.wait = s.l.Spend(ctx, s.key) })
		}
		for queued() < len(spends) {
			if ctx.Err() != nil {
				t.Fatalf("%d of %d spends queued", queued(), len(spends))
			}
			time.Sleep(time.Millisecond)
		}
		release()
		wg.Wait()
		for _, s := range spends {
			switch {
			case s.key == "hot" && s.pass:
				passed++
			case s.key == "hot":
				waits = append(waits, s.wait)
			case !s.pass:
				t.Errorf("%s's first spend refused", s.key)
			}
		}
		return passed, waits
	}
	wantWaits := func(waits []time.Duration, n int, want time.Duration) {
		t.Helper()
		if len(waits) != n {
			t.Fatalf("%d refused, want %d", len(waits), n)
		}
		for _, w := range waits {
			if w != want {
				t.Errorf("refused, retry after %v; want %v", w, want)
			}
		}
	}

	// A full bucket of 3: 3 of 8 pass; the next is a minute away.
	passed, waits := together(1, 8)
	if passed != 3 {
		t.Errorf("a full bucket: %d of 8 passed, want 3", passed)
	}
	wantWaits(waits, 5, time.Minute)
	// 90 s later, one and a half events are back: 1 of 4 passes, and the
	// next is 30 s away.
	clock.Add(90 * time.Second)
	passed, waits = together(2, 4)
	if passed != 1 {
		t.Errorf("a bucket with one event and a half: %d of 4 passed, want 1", passed)
	}
	wantWaits(waits, 3, 30*time.Second)
	// Long after, the bucket is full again: 3 of 3 pass.
	clock.Add(time.Hour)
	if passed, _ = together(3, 3); passed != 3 {
		t.Errorf("a bucket full again: %d of 3 passed, want 3", passed)
	}
	if ok, wait := writes.Spend(ctx, "hot"); ok || wait != time.Minute {
		t.Errorf("after the batches: %v, retry after %v; want refused for a minute", ok, wait)
	}
}

// A spend queued when the store closes is not counted and so passes, as
// one whose database cannot be reached: never refused for a count that
// was not made.
func TestLimitsSpendAtClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, _ := open(t, pg.Options{})
	l := db.Limiter("writes", auth.Rate{Burst: 1, Every: time.Hour})
	queued, release := db.HoldSpends()
	passed := make(chan bool, 1)
	go func() {
		ok, _ := l.Spend(ctx, "ada")
		passed <- ok
	}()
	for queued() < 1 {
		if ctx.Err() != nil {
			t.Fatal("the spend never queued")
		}
		time.Sleep(time.Millisecond)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	release()
	if !<-passed {
		t.Error("a spend the closing store never counted was refused")
	}
}

// TestLimitsUnreachable: a limiter whose database is gone lets the event
// through rather than lock everyone out.
func TestLimitsUnreachable(t *testing.T) {
	url := cluster.Database(t)
	db, err := pg.Open(context.Background(), url, pg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := db.Limiter("writes", auth.Rate{Burst: 1, Every: time.Hour})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if ok, _ := l.Spend(context.Background(), "ada"); !ok {
			t.Fatal("a limiter without its database refused")
		}
	}
}
