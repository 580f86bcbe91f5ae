package bolt

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// Group commit. Every bbolt commit ends in fsync, and on small machines the
// fsync is most of a write's cost. Writers therefore queue their work and a
// single committer goroutine runs everything queued in one transaction: one
// fsync for all of it. Nobody waits for a timer — a lone writer is committed
// at once — and under load the queue fills while the previous fsync runs, so
// batches grow exactly when they pay off. bbolt's own db.Batch does the same
// with a delay timer, which a lone writer would pay on every request.
//
// A write function may run more than once: when one function of a batch
// fails, the whole transaction is rolled back and the batch is retried
// without it. Functions must therefore be idempotent — they recompute
// everything they report from the transaction they are given.

// maxBatchOps bounds one transaction's work so a burst cannot make a commit
// (and the read transactions it copies pages for) arbitrarily large.
const maxBatchOps = 256

// errClosed is returned to writes queued after Close.
var errClosed = errors.New("database is closed")

type writeOp struct {
	fn   func(*bbolt.Tx) error
	done chan error
	// upkeep marks the server's own housekeeping (merges, sweeps, trims),
	// which waits for its commit as long as it takes.
	upkeep bool
	// create marks a message's create, the write that needs new room: only
	// its commit succeeding says that storage was freed (see
	// noteCommitted).
	create bool
}

type committer struct {
	db   *DB
	bolt *bbolt.DB

	mu      sync.Mutex
	queue   []*writeOp
	closed  bool
	wake    chan struct{}
	stopped chan struct{}

	commits atomic.Uint64 // successful write transactions, so each an fsync
	ops     atomic.Uint64 // write functions committed

	onCommit func(took time.Duration, writes int) // nil: nobody asked
	// timeout bounds a client's write's wait for its commit (overdue);
	// set before the first write.
	timeout time.Duration

	// pending collects the changes the running transaction appended to the
	// change log; feed gets them once it is on disk. Only the committer
	// goroutine touches pending.
	pending []*model.Change
	feed    *changeFeed
}

func newCommitter(db *DB) *committer {
	c := &committer{db: db, bolt: db.bolt, feed: &db.feed, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	go c.run()
	return c
}

// update runs fn in a write transaction shared with other concurrent
// writers, and returns once that transaction is on disk (or has failed).
func (c *committer) update(fn func(*bbolt.Tx) error) error {
	return c.queueWrite(&writeOp{fn: fn, done: make(chan error, 1)})
}

// create is update for a message's create.
func (c *committer) create(fn func(*bbolt.Tx) error) error {
	return c.queueWrite(&writeOp{fn: fn, done: make(chan error, 1), create: true})
}

// upkeep is update for the server's housekeeping.
func (c *committer) upkeep(fn func(*bbolt.Tx) error) error {
	return c.queueWrite(&writeOp{fn: fn, done: make(chan error, 1), upkeep: true})
}

func (c *committer) queueWrite(op *writeOp) error {
	if err := c.db.broken.Load(); err != nil {
		return *err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errClosed
	}
	c.queue = append(c.queue, op)
	// Under the lock, so close cannot close wake between the check above
	// and this send.
	select {
	case c.wake <- struct{}{}:
	default: // the committer is already due to look at the queue
	}
	c.mu.Unlock()
	if op.upkeep {
		return <-op.done // the server's own work waits as long as it takes
	}
	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	select {
	case err := <-op.done:
		return err
	case <-timer.C:
		return c.overdue(op)
	}
}

// DefaultWriteTimeout is Options.WriteTimeout's default: far above what a
// commit takes on a disk that works (its fsync included, milliseconds on
// an SD card), as the PostgreSQL store's deadline of a call is.
const DefaultWriteTimeout = 10 * time.Second

// errWriteNotTaken refuses a write still queued when its time ran out:
// the commits before it had not ended, and it was never run.
var errWriteNotTaken = model.WritesNotCompleting(2 * time.Second)

// errCommitOverdue answers a write whose commit had begun and not ended
// when its time ran out.
var errCommitOverdue = model.CommitOverdue(2 * time.Second)

// overdue answers a client's write whose commit has not ended within the
// committer's timeout. bbolt's reads do not wait for a commit, so a disk
// that hangs under one (its fsync not returning) leaves reads and
// /healthz answering, and the writes waiting. Still queued, the write is
// taken out of the queue: never run, it is refused as unavailable. In the
// commit under way, it is neither done nor undone until that commit ends,
// which the disk decides: its outcome is unknown. A commit cannot be
// abandoned, so the committer, and the writes queued behind it, still
// wait for the disk.
func (c *committer) overdue(op *writeOp) error {
	c.mu.Lock()
	i := slices.Index(c.queue, op)
	if i >= 0 {
		c.queue = slices.Delete(c.queue, i, i+1)
	}
	c.mu.Unlock()
	if i >= 0 {
		return errWriteNotTaken
	}
	select {
	case err := <-op.done: // its commit ended just now
		return err
	default:
		return errCommitOverdue
	}
}

// close commits what is queued and stops the committer.
func (c *committer) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	close(c.wake)
	c.mu.Unlock()
	<-c.stopped
}

func (c *committer) run() {
	defer close(c.stopped)
	for range c.wake {
		c.drain()
	}
	// The wake channel is closed only once closed is set, so nothing can be
	// queued behind this final drain.
	c.drain()
}

// drain commits what is queued, maxBatchOps at a time, until the queue is
// empty.
func (c *committer) drain() {
	for {
		c.mu.Lock()
		n := min(len(c.queue), maxBatchOps)
		batch := c.queue[:n:n]
		c.queue = c.queue[n:]
		c.mu.Unlock()
		if n == 0 {
			return
		}
		c.commit(batch)
	}
}

// commit runs batch in one transaction. A function that fails gets its own
// error and is dropped; the rest are retried in a fresh transaction, so one
// writer's refusal never undoes or blocks another's write.
func (c *committer) commit(batch []*writeOp) {
	for len(batch) > 0 {
		failed := -1
		var failure error
		start := time.Now()
		c.pending = c.pending[:0]
		var txid int
		err := c.bolt.Update(func(tx *bbolt.Tx) error {
			txid = tx.ID()
			fillGrowingBuckets(tx)
			for i, op := range batch {
				if err := runWrite(op.fn, tx); err != nil {
					failed, failure = i, err
					return err
				}
			}
			return nil
		})
		switch {
		case err == nil:
			if slices.ContainsFunc(batch, func(op *writeOp) bool { return op.create }) {
				c.db.noteCommitted()
			}
			c.commits.Add(1)
			c.ops.Add(uint64(len(batch)))
			if c.onCommit != nil {
				c.onCommit(time.Since(start), len(batch))
			}
			// Before the writers hear of it, so a client that sees its 201
			// and then opens a stream finds the change in the feed.
			c.feed.publish(c.pending)
			for _, op := range batch {
				op.done <- nil
			}
			return
		case failed < 0: // the commit itself failed
			c.db.checkRolledBack(txid, err)
			err = c.db.noteCommitFailed(err)
			if errors.Is(err, model.ErrNoSpace) && len(batch) > 1 {
				// One large write must not take small ones down with it: a
				// login's token may fit in pages the file already has.
				for _, op := range batch {
					c.commit([]*writeOp{op})
				}
				return
			}
			for _, op := range batch {
				op.done <- err
			}
			return
		default:
			batch[failed].done <- failure
			batch = append(batch[:failed:failed], batch[failed+1:]...)
		}
	}
}

// WriteStats counts committed write transactions and the writes they held;
// Ops/Commits is the average number of writes sharing one fsync.
type WriteStats struct {
	Commits, Ops uint64
}

// WriteStats reports group-commit counters since Open.
func (db *DB) WriteStats() WriteStats {
	return WriteStats{Commits: db.writes.commits.Load(), Ops: db.writes.ops.Load()}
}

// runWrite runs one write function, turning a panic into that write's
// error: the function runs on the committer goroutine, where a panic would
// take the whole server down instead of one request.
func runWrite(fn func(*bbolt.Tx) error, tx *bbolt.Tx) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("write panicked: %v", v)
		}
	}()
	return fn(tx)
}

// errNoSpace is what a write that failed for lack of storage returns: a
// refusal the client may be told of, not an internal error.
var errNoSpace = model.StorageFull()

// noteCommitFailed tells a commit that failed for lack of storage (the
// disk, or a quota, is full) from other failures: it returns errNoSpace
// for it, and remembers that writes are failing (WritesFailing) until one
// succeeds. bbolt rolls such a commit back whole and reuses the pages it
// had taken, so the file stays sound and the next commit may succeed as
// soon as space is freed.
func (db *DB) noteCommitFailed(err error) error {
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return err
	}
	var refusal error = errNoSpace
	if db.noSpace.Swap(&refusal) == nil {
		db.log.Warn("writes are failing: the storage is full; they succeed again once space is freed", "err", err)
	}
	return errNoSpace
}

// noteCommitted ends a spell of writes failing for lack of storage; only
// a commit that carried a message's create does. The smaller writes (a
// login's token, an edit, the server's housekeeping) often fit in pages
// the file already has, so their success says nothing of the disk: while
// creates are refused for lack of room, writes are failing, whatever
// smaller write last succeeded.
func (db *DB) noteCommitted() {
	if db.noSpace.Load() != nil && db.noSpace.Swap(nil) != nil {
		db.log.Info("writes succeed again: storage was freed")
	}
}

// errBroken refuses writes once a failed commit turned out to be on disk
// after all (see checkRolledBack).
var errBroken = errors.New("a commit failed after it was written, so the server no longer writes; restart it, and it reads what is on disk")

// checkRolledBack makes sure a commit that failed left nothing behind.
// bbolt rolls back a commit that fails before its meta page is written,
// which covers a full disk on ordinary filesystems. If the meta page went
// out and only its sync failed, the transaction is visible to readers
// although its writers were told it failed: then the process may no
// longer write (its change feed would skip what readers see, and clients
// told of a failure would write again), and Ping says so. A restart reads
// what is on disk.
func (db *DB) checkRolledBack(txid int, commitErr error) {
	visible := false
	_ = db.bolt.View(func(tx *bbolt.Tx) error {
		visible = tx.ID() >= txid
		return nil
	})
	if !visible {
		return
	}
	broken := error(errBroken)
	if db.broken.CompareAndSwap(nil, &broken) {
		db.log.Error("a commit failed after it reached the disk; refusing writes until a restart", "err", commitErr)
	}
}
