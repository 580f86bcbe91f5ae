package stream

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// The memory streams hold, whatever their number: the window's rendered
// events (hubMemoryBytes), the batches replays keep to share
// (replayMemory), and what is in flight, drawn from a budget of
// streamMemory bytes: every write a stream has under way holds its bytes
// from the budget until it returns, and a replay its render. A write
// waiting on a client that stopped reading thus holds its share until its
// deadline cuts the client off, and no more: a stream catching up writes
// at most catchUpWriteBytes at once, a live one liveWriteBytes, and a
// catch-up that finds the budget spent waits for it, holding nothing,
// while a live stream simply falls behind for a round.
const (
	streamMemory      = 8 << 20
	catchUpWriteBytes = 256 << 10
	liveWriteBytes    = 256 << 10
)

// budget counts the bytes streams hold in flight against streamMemory.
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
