package pg

import (
	"errors"
	"slices"
	"sync"
)

// errClosed is what an operation gets when it comes after Close.
var errClosed = errors.New("pg: the store is closed")

// batches queues operations and runs them in batches, on at most limit
// goroutines at once, started when operations come and ending when the
// queue is empty. Nobody waits for a timer: a lone operation goes at once,
// and under load operations queue while the batches in flight run, so
// batches grow exactly when they pay off. Creates (groupcommit.go), short
// reads (readbatch.go) and searches that fill a page early (search.go) go
// this way.
type batches[T any] struct {
	limit   int       // batches in flight at most
	size    int       // operations a batch at most
	run     func([]T) // runs one batch and answers each of its operations
	workers *sync.WaitGroup

	mu      sync.Mutex
	queue   []T
	running int
	shut    bool // no operation is taken any more
}

// add queues op and starts a goroutine for the batches if fewer than
// limit run. After close it takes nothing and returns false.
func (b *batches[T]) add(op T) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shut {
		return false
	}
	b.queue = append(b.queue, op)
	if b.running < b.limit {
		b.running++
		// Counted under the lock close takes, so never after the store's
		// Close has begun to wait for its goroutines.
		b.workers.Add(1)
		go b.drain()
	}
	return true
}

// close takes no more operations; those queued still run.
func (b *batches[T]) close() {
	b.mu.Lock()
	b.shut = true
	b.mu.Unlock()
}

// drain runs batches until the queue is empty.
func (b *batches[T]) drain() {
	defer b.workers.Done()
	for {
		b.mu.Lock()
		n := min(len(b.queue), b.size)
		if n == 0 {
			b.running--
			b.mu.Unlock()
			return
		}
		batch := slices.Clone(b.queue[:n])
		b.queue = slices.Delete(b.queue, 0, n)
		b.mu.Unlock()
		b.run(batch)
	}
}
