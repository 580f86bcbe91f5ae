package bolt

import (
	"context"
	"sync"
	"sync/atomic"
)

// searchTurns decides when a costly search — one still walking after its
// first read transaction — may go on. Only a few run at once (slots), so
// a client sending many cannot take every CPU from the ordinary requests,
// which never get here. And an account's costly searches go one at a
// time: the others wait behind the account's own, not in the shared
// queue, so one account's pile of them delays another account's costly
// search by at most one of its searches, not all of them.
type searchTurns struct {
	slots   chan struct{} // one per costly search running
	waiting atomic.Int64  // searches waiting for their account's turn or a slot

	mu       sync.Mutex
	accounts map[uint64]*accountTurn // accounts with a costly search running or waiting

	// For tests: taken, when set, hears each account whose search has just
	// got its slot, in the order they got them. The order searches finish
	// in does not show it: one may lose the CPU between giving up its slot
	// and returning while the next runs to its end.
	taken func(account uint64)
}

type accountTurn struct {
	turn     chan struct{} // capacity 1: held while the account's costly search waits for a slot or runs
	searches int           // holding or waiting for turn; the entry goes at zero
}

func newSearchTurns(slots int) *searchTurns {
	return &searchTurns{slots: make(chan struct{}, slots), accounts: make(map[uint64]*accountTurn)}
}

// take waits for account's turn and then for a slot, or until ctx ends.
// The caller runs release when its search is done.
func (st *searchTurns) take(ctx context.Context, account uint64) (release func(), err error) {
	st.mu.Lock()
	a := st.accounts[account]
	if a == nil {
		a = &accountTurn{turn: make(chan struct{}, 1)}
		st.accounts[account] = a
	}
	a.searches++
	st.mu.Unlock()
	leave := func() {
		st.mu.Lock()
		if a.searches--; a.searches == 0 {
			delete(st.accounts, account)
		}
		st.mu.Unlock()
	}
	if err := st.wait(ctx, a.turn); err != nil {
		leave()
		return nil, err
	}
	if err := st.wait(ctx, st.slots); err != nil {
		<-a.turn
		leave()
		return nil, err
	}
	if st.taken != nil {
		st.taken(account)
	}
	return func() {
		<-st.slots
		<-a.turn
		leave()
	}, nil
}

// wait puts a token into ch, counting itself as waiting while ch is full.
func (st *searchTurns) wait(ctx context.Context, ch chan struct{}) error {
	select {
	case ch <- struct{}{}:
		return nil
	default:
	}
	st.waiting.Add(1)
	defer st.waiting.Add(-1)
	select {
	case ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
