package stream

import (
	"context"
	"errors"
	"sync"

	"herald/model"
)

// streamBatch bounds the changes a stream catching up takes at once, so
// it writes in pieces and checks its lag between them.
const streamBatch = 256

// The window keeps at most hubMemory rendered events and about
// hubMemoryBytes of them (one event may render 60 KB of JSON). A lag limit
// beyond the window would send live streams to the log, so MaxLag is
// capped by it.
const (
	hubMemory      = 4096
	hubMemoryBytes = 16 << 20
)

// errBehind: the position asked for has left the window.
var errBehind = errors.New("position older than the hub's window")

// window holds the newest changes of the feed rendered as events, shared
// by every stream: each change is rendered once, whoever sends it. It only
// ever appends past its end or drops from its front, so a slice of it
// handed out stays valid after the lock is released.
type window struct {
	feed Feed
	// mu is held while rendering; admissions take the hub's own lock
	// rather than wait on a render.
	mu       sync.Mutex
	events   []*event // the newest rendered events, oldest first, contiguous
	bytes    int      // size of events, summed
	rendered uint64   // the change the window ends at
	history  history  // the newest event of each message in events
	// replays, when set, is told of every change the window renders, so
	// that it drops the batches it keeps that show a message as it no
	// longer is, and of every change the window skips.
	replays *replays
}

// upTo renders the window up to head and returns it.
func (w *window) upTo(ctx context.Context, head uint64) ([]*event, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.renderUpTo(ctx, head); err != nil {
		return nil, err
	}
	return w.events, nil
}

// eventsAfter returns the events of window after position last up to
// head, or errBehind when last has left the window.
func eventsAfter(window []*event, last, head uint64) ([]*event, error) {
	if last >= head {
		return nil, nil
	}
	if len(window) == 0 || last+1 < window[0].seq {
		return nil, errBehind
	}
	i := int(last + 1 - window[0].seq)
	j := min(len(window), int(head+1-window[0].seq))
	return window[i:j:j], nil
}

// restart empties the window, to go on after position at: the changes up
// to it are never rendered, so nothing can tell what they changed.
func (w *window) restart(at uint64) {
	w.events, w.bytes, w.rendered, w.history = nil, 0, at, make(history)
	if w.replays != nil {
		w.replays.clear()
	}
}

// renderUpTo brings the window up to head; w.mu is held.
func (w *window) renderUpTo(ctx context.Context, head uint64) error {
	if head <= w.rendered {
		return nil
	}
	if w.history == nil || head-w.rendered > hubMemory {
		// Nobody streamed for a long while: start the window afresh rather
		// than render what no live stream can want.
		w.restart(max(w.rendered, head-min(head, hubMemory)))
	}
	for w.rendered < head {
		chs, _, err := w.feed.RecentChangesAfter(ctx, w.rendered, streamBatch)
		if errors.Is(err, model.ErrChangeUnknown) {
			// Trimmed: streams that need it go to the log, which says so.
			w.restart(head)
			return nil
		}
		if err != nil {
			if w.replays != nil {
				// Whatever committed since is not known to have been seen.
				w.replays.clear()
			}
			return err
		}
		if len(chs) == 0 {
			break
		}
		for _, ev := range renderEvents(chs, w.history) {
			w.events = append(w.events, ev)
			w.bytes += ev.size
			if w.replays != nil {
				w.replays.changed(ev)
			}
		}
		w.rendered = chs[len(chs)-1].Seq
	}
	// Drop from the front by reslicing: rounds and catch-ups hold slices
	// of the window outside the lock, and append only writes past their end.
	drop := 0
	for len(w.events)-drop > 1 && (len(w.events)-drop > hubMemory || w.bytes > hubMemoryBytes) {
		w.bytes -= w.events[drop].size
		w.history.forget(w.events[drop])
		drop++
	}
	w.events = w.events[drop:]
	return nil
}
