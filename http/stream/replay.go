package stream

import (
	"context"
	"slices"
	"sync"

	"herald/model"
)

// Replays: a stream resuming from a position the window no longer holds
// reads the log from there, a batch at a time. Streams resuming from the
// same place (every stream of an instance that stopped, say, resuming on
// another) share each batch: it is read and rendered once and kept, up to
// replayMemory in all, least recently used dropped first. A kept batch
// shows messages as they were when it was read, so the window, which sees
// every change after that, drops a batch as soon as a message it shows
// changes.

// replayMemory bounds the rendered events replays keep for sharing.
const replayMemory = 4 << 20

// replayRenderBytes is what reading and rendering a batch may take at
// once: a batch holds at most model.ChangeBatchBytes of content, which
// JSON may escape to six times as many bytes (a control character is six:
// \u0001). A catch-up draws it from the hub's budget before it asks for
// a batch, and gives it back once it has written what it took of it.
const replayRenderBytes = 7 * model.ChangeBatchBytes

// replayChangesKept bounds the changes a replays remembers as seen since
// its batches were read; beyond, it forgets them and keeps none of the
// batches being read.
const replayChangesKept = 1 << 16

// replays keeps the batches catch-ups read from the log.
type replays struct {
	feed Feed

	mu      sync.Mutex
	kept    []*replayBatch           // least recently used first
	bytes   int                      // size of kept's events, summed
	reading map[uint64]chan struct{} // positions being read, each closed when done
	seen    map[uint64]uint64        // message ID → the newest change of it the window rendered
	epoch   uint64                   // raised whenever seen is forgotten
}

// replayBatch is a batch of the log rendered for catch-ups.
type replayBatch struct {
	after    uint64              // the position it follows
	events   []*event            // the changes after it, oldest first
	head     uint64              // the head the read saw
	messages map[uint64]struct{} // the messages it shows
	size     int
}

// last is the position the batch ends at.
func (b *replayBatch) last() uint64 { return b.events[len(b.events)-1].seq }

func newReplays(feed Feed) *replays {
	return &replays{feed: feed, reading: make(map[uint64]chan struct{}), seen: make(map[uint64]uint64)}
}

// after returns the events after position last as a batch of the log
// holds them, shared with other streams where one is kept, and the head
// its read saw. The caller holds replayRenderBytes of the hub's budget
// for it. Errors: those of the feed (model.ErrChangeUnknown for a
// position the log no longer holds).
func (r *replays) after(ctx context.Context, last uint64) ([]*event, uint64, error) {
	for {
		r.mu.Lock()
		if b := r.find(last); b != nil {
			i, _ := slices.BinarySearchFunc(b.events, last+1, func(ev *event, seq uint64) int { return compare(ev.seq, seq) })
			r.mu.Unlock()
			return b.events[i:], b.head, nil
		}
		done, busy := r.reading[last]
		if !busy {
			done = make(chan struct{})
			r.reading[last] = done
			r.mu.Unlock()
			return r.read(ctx, last, done)
		}
		r.mu.Unlock()
		// Another stream reads this batch: wait, then take it.
		select {
		case <-done:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
}

func compare(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// find returns the kept batch holding the change after last, most
// recently used from then on; nil when none does. r.mu is held.
func (r *replays) find(last uint64) *replayBatch {
	for i, b := range r.kept {
		if b.after <= last && last < b.last() {
			r.kept = append(slices.Delete(r.kept, i, i+1), b)
			return b
		}
	}
	return nil
}

// read reads and renders the batch after last, keeps it unless a message
// it shows changed meanwhile, and closes done.
func (r *replays) read(ctx context.Context, last uint64, done chan struct{}) ([]*event, uint64, error) {
	defer func() {
		r.mu.Lock()
		delete(r.reading, last)
		r.mu.Unlock()
		close(done)
	}()
	r.mu.Lock()
	epoch := r.epoch
	r.mu.Unlock()
	chs, head, err := r.feed.ChangesAfter(ctx, last, streamBatch)
	if err != nil || len(chs) == 0 {
		return nil, head, err
	}
	b := &replayBatch{after: last, events: renderEvents(chs, make(history)), head: head, messages: make(map[uint64]struct{})}
	for _, ev := range b.events {
		b.size += ev.size
		if ev.message != 0 {
			b.messages[ev.message] = struct{}{}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if epoch == r.epoch && !r.staleLocked(b) && b.size <= replayMemory/4 {
		r.kept = append(r.kept, b)
		r.bytes += b.size
		for len(r.kept) > 0 && r.bytes > replayMemory {
			r.bytes -= r.kept[0].size
			r.kept = slices.Delete(r.kept, 0, 1)
		}
	}
	return b.events, head, nil
}

// staleLocked reports whether a message b shows changed after b was read.
// r.mu is held.
func (r *replays) staleLocked(b *replayBatch) bool {
	for id := range b.messages {
		if r.seen[id] > b.head {
			return true
		}
	}
	return false
}

// changed hears of a change the window rendered: the batches that show
// its message as it was before are dropped.
func (r *replays) changed(ev *event) {
	if ev.message == 0 || ev.kind == model.MessageCreated {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) >= replayChangesKept {
		clear(r.seen)
		r.epoch++
	}
	r.seen[ev.message] = ev.seq
	r.kept = slices.DeleteFunc(r.kept, func(b *replayBatch) bool {
		_, shown := b.messages[ev.message]
		if shown && b.head < ev.seq {
			r.bytes -= b.size
			return true
		}
		return false
	})
}

// clear drops every kept batch, and keeps none of those being read: the
// window skipped changes, which may have changed what they show.
func (r *replays) clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kept, r.bytes = nil, 0
	clear(r.seen)
	r.epoch++
}
