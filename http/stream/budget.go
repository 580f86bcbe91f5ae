package stream

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// The memory streams hold, whatever their number, is bounded by bytes:
//
//   - the window of events rendered once for every stream (hubMemoryBytes);
//   - the batches of the log replays keep to share (replayMemory);
//   - what catch-ups hold in flight, drawn from catchUpMemory: a catch-up
//     takes its bytes before it reads the log or gathers events, and gives
//     them back once its write has returned, catchUpWriteBytes at most for
//     events of the window, replayRenderBytes for a batch of the log;
//   - what live writes hold beyond the window, drawn from liveMemory: a
//     round takes the bytes of the events it sends, once however many
//     streams it sends them to (they share the window's copy), and gives
//     them back when the last of its writes has returned. A write stuck on
//     a client that stopped reading thus keeps its round's events from
//     being freed when the window drops them, for WriteTimeout at most.
//
// A catch-up that finds catchUpMemory spent waits for it, holding nothing,
// up to WriteTimeout, then is told to reconnect. A round that finds
// liveMemory spent sends nothing that time; its streams fall behind, and
// one that leaves the window catches up from the log instead (see
// rejoin). The streams of one account draw their catch-ups from a share
// of their own, accountMemory, first, so that one account's streams,
// however many, cannot take every catch-up's turn; live rounds are not
// drawn from it, so what waits for a catch-up never holds up a live
// stream.
const (
	catchUpMemory     = 8 << 20
	liveMemory        = 16 << 20
	accountMemory     = 1 << 20
	catchUpWriteBytes = 256 << 10
	liveWriteBytes    = 256 << 10
)

// budget counts bytes held against a bound.
type budget struct {
	sem  *semaphore.Weighted
	size int64
	// freed, when set, runs after every release, so that live streams
	// that found the budget spent are served again.
	freed func()
}

func newBudget(bytes int64) *budget {
	return &budget{sem: semaphore.NewWeighted(bytes), size: bytes}
}

// acquire waits for n bytes of the budget; a request for more than the
// whole budget waits for the whole of it.
func (b *budget) acquire(ctx context.Context, n int) error {
	return b.sem.Acquire(ctx, b.clamp(n))
}

// tryAcquire takes n bytes of the budget if they are free now.
func (b *budget) tryAcquire(n int) bool { return b.sem.TryAcquire(b.clamp(n)) }

// release gives back n bytes taken by acquire or tryAcquire.
func (b *budget) release(n int) {
	b.sem.Release(b.clamp(n))
	if b.freed != nil {
		b.freed()
	}
}

func (b *budget) clamp(n int) int64 { return min(int64(n), b.size) }

// held is what a catch-up's batch holds: bytes of its account's share and
// of the hub's catch-up budget.
type held struct {
	acct  *account
	bytes int
}

// takeCatchUp waits, until ctx is done, for n bytes of acct's share, then
// of the hub's catch-up budget.
func (h *Hub) takeCatchUp(ctx context.Context, acct *account, n int) (held, error) {
	if err := acct.share.acquire(ctx, n); err != nil {
		return held{}, err
	}
	if err := h.catchUps.acquire(ctx, n); err != nil {
		acct.share.release(n)
		return held{}, err
	}
	return held{acct, n}, nil
}

// keep gives back what the batch took beyond n bytes, which it holds on.
func (h *Hub) keep(hd *held, n int) {
	if extra := hd.bytes - n; extra > 0 {
		h.catchUps.release(extra)
		hd.acct.share.release(extra)
		hd.bytes = n
	}
}

// giveBack returns what a batch held.
func (h *Hub) giveBack(hd held) {
	if hd.bytes > 0 {
		h.catchUps.release(hd.bytes)
		hd.acct.share.release(hd.bytes)
	}
}

// roundHold is what a round holds of liveMemory: the bytes of the events
// it sent, until the last of its writes has returned.
type roundHold struct {
	h       *Hub
	bytes   int
	pending atomic.Int32 // writes under way, plus one while the round hands them out
}

// done marks one of the round's writes returned, or the round done handing
// them out; the last gives the bytes back.
func (r *roundHold) done() {
	if r.pending.Add(-1) == 0 {
		r.h.lives.release(r.bytes)
	}
}
