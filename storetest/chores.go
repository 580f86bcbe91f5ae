package storetest

import (
	"context"
	"errors"
	"sync"
	"time"

	"herald/chores"
	"herald/model"
)

// testChores: the chores loop, run on the store as main runs it, writes
// the token uses noted and, by the store's clock, sweeps an expired token
// and deletes a message past the retention, keeping a recent one.
func testChores(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, reg := e.user("ada@example.com")
	if _, err := e.Store.IssueLoginToken(ctx, ada.ID, ada.PasswordHash, TokenHash("kiosk"), time.Minute); err != nil {
		t.Fatal(err)
	}
	old := e.post(ada.ID, "an hour from now this is past retention")
	e.clock.Add(time.Hour)
	recent := e.post(ada.ID, "this stays")
	if _, _, err := e.Store.Authenticate(ctx, reg); err != nil { // a use to write
		t.Fatal(err)
	}
	used := e.clock.Now().Truncate(time.Microsecond)
	loopCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		chores.Run(loopCtx, e.Store, chores.Config{FlushEvery: time.Millisecond, SweepEvery: time.Millisecond, Retain: 30 * time.Minute},
			func(chore string, err error) { t.Errorf("%s: %v", chore, err) })
	})
	defer wg.Wait()
	defer stop()
	// Polled, not timed: the deadline only keeps a broken loop from
	// hanging the test.
	deadline := time.Now().Add(10 * time.Second)
	for {
		toks, err := e.Store.Tokens(ctx, ada.ID)
		if err != nil {
			t.Fatal(err)
		}
		swept := len(toks) == 1
		// The account's last sighting is what a written use moves.
		a, err := e.Store.Account(ctx, model.ByServer(), ada.ID)
		if err != nil {
			t.Fatal(err)
		}
		written := a.LastSeenAt.Equal(used)
		_, _, oldErr := e.Store.Message(ctx, model.ByServer(), old.ID)
		retained := errors.Is(oldErr, model.ErrNotFound)
		if swept && written && retained {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s of chores: expired token swept %v, use written %v, old message deleted %v", swept, written, retained)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, _, err := e.Store.Message(ctx, model.ByServer(), recent.ID); err != nil {
		t.Errorf("a recent message after the retention's sweep: %v", err)
	}
}
