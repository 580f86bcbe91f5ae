package bolt

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"herald/model"
)

// TestLongSearchesTakeTurns: a search past its first read transaction
// needs one of a few slots, so many costly searches cannot take every CPU
// from ordinary ones. The test holds every slot itself: a costly search
// then waits (until its client gives up), ordinary searches do not, and
// once a slot is free the costly one finishes with the same answer.
func TestLongSearchesTakeTurns(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	bulkMessages(t, db, []uint64{ada.ID}, 0, func(i int) string { return []string{"left", "right"}[i%2] }, 4*stepsPerTransaction)
	costly := model.SearchQuery{Terms: model.Terms("left right")}
	want := mustSearch(t, db, costly) // the words never meet: a walk over both lists
	if len(want.Messages) != 0 {
		t.Fatalf("costly search = %d messages, want none", len(want.Messages))
	}

	for range cap(db.turns.slots) {
		db.turns.slots <- struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waited := make(chan error, 1)
	go func() {
		_, _, err := db.SearchMessages(ctx, model.ByServer(), costly)
		waited <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if running, waiting := db.LongSearchLoad(); running == cap(db.turns.slots) && waiting == 1 {
			break
		}
		if time.Now().After(deadline) {
			running, waiting := db.LongSearchLoad()
			t.Fatalf("with every slot taken: %d running, %d waiting; want %d and 1", running, waiting, cap(db.turns.slots))
		}
	}
	cancel() // the client gives up
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Errorf("costly search with every slot taken = %v, want it to wait until its context ends", err)
	}
	if _, waiting := db.LongSearchLoad(); waiting != 0 {
		t.Errorf("%d searches still counted as waiting after the only one gave up", waiting)
	}
	for _, q := range []model.SearchQuery{{}, {Terms: model.Terms("left")}, {Terms: model.Terms("right"), OwnerEmail: "ada@example.com"}} {
		if p := mustSearch(t, db, q); len(p.Messages) != model.DefaultSearchLimit {
			t.Errorf("ordinary search %+v with every slot taken = %d messages, want %d", q, len(p.Messages), model.DefaultSearchLimit)
		}
	}

	<-db.turns.slots
	got := mustSearch(t, db, costly)
	if len(got.Messages) != 0 || got.NextBeforeID != want.NextBeforeID {
		t.Errorf("costly search with a slot free = %d messages, next %d; want none, next %d", len(got.Messages), got.NextBeforeID, want.NextBeforeID)
	}
	if n := len(db.turns.slots); n != cap(db.turns.slots)-1 {
		t.Errorf("%d slots taken after the search, want it to have given its own back (%d)", n, cap(db.turns.slots)-1)
	}
	for range cap(db.turns.slots) - 1 {
		<-db.turns.slots
	}
}

// TestLongSearchesTakeTurnsByAccount: an account's costly searches go one
// at a time, so another account's costly search waits behind one of them,
// not behind all of them. With one slot, Ada queues two costly searches,
// then Bob one: Bob's must run before Ada's second.
func TestLongSearchesTakeTurnsByAccount(t *testing.T) {
	db := mustOpen(t)
	ada, adaToken := mustCreateUser(t, db, "ada@example.com")
	bob, bobToken := mustCreateUser(t, db, "bob@example.com")
	// Enough that each search spends its whole budget and must take a turn.
	bulkMessages(t, db, []uint64{ada.ID}, 0, func(i int) string { return []string{"left", "right"}[i%2] }, 2*stepsPerPage)
	costly := model.SearchQuery{Terms: model.Terms("left right")}

	for range cap(db.turns.slots) { // every slot taken, until the searches are queued
		db.turns.slots <- struct{}{}
	}
	var mu sync.Mutex
	var turns []uint64 // accounts, in the order their searches got a slot
	db.turns.taken = func(account uint64) {
		mu.Lock()
		turns = append(turns, account)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	search := func(name string, token model.TokenHash, waiting int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := db.SearchMessages(context.Background(), model.ByToken(token), costly); err != nil {
				t.Errorf("%s's search: %v", name, err)
			}
		}()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if _, w := db.LongSearchLoad(); w == waiting {
				return
			}
			if time.Now().After(deadline) {
				_, w := db.LongSearchLoad()
				t.Fatalf("after %s's search started %d wait, want %d", name, w, waiting)
			}
		}
	}
	search("Ada 1", adaToken, 1)
	search("Ada 2", adaToken, 2)
	search("Bob", bobToken, 3)
	<-db.turns.slots // one slot free
	wg.Wait()
	for range cap(db.turns.slots) - 1 {
		<-db.turns.slots
	}
	// Which of Ada's first and Bob's gets the slot first is the runtime's
	// choice; Ada's second only queues for a slot once her first is done,
	// behind Bob's, which is already queued (a channel serves its waiting
	// senders in order).
	if want := ada.ID; len(turns) != 3 || turns[2] != want || !slices.Contains(turns, bob.ID) {
		t.Errorf("searches got their slots in the order of accounts %v, want Ada's (%d) second one last, after Bob's (%d)", turns, ada.ID, bob.ID)
	}
	if running, waiting := db.LongSearchLoad(); running != 0 || waiting != 0 {
		t.Errorf("afterwards %d running and %d waiting, want none", running, waiting)
	}
	db.turns.mu.Lock()
	if n := len(db.turns.accounts); n != 0 {
		t.Errorf("%d accounts still have turns, want none", n)
	}
	db.turns.mu.Unlock()
}
