package stream

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"time"

	"herald/model"
)

// start catches sub up from the position it resumes from (or from head,
// the log's head when its status went out), then hands it to the
// dispatcher, all on the request's goroutine.
func (h *Hub) start(ctx context.Context, sub *subscriber, from *uint64, head uint64) {
	c := catchUp{last: head, allowedLag: uint64(h.limits.MaxLag)}
	if from != nil {
		c.last = *from
		if c.last < head {
			c.allowedLag += head - c.last
			c.replayedUpTo = head
		}
		// Whether a position can be resumed is the log's to say: the
		// window may still hold changes the log has trimmed, and another
		// instance, or this one after a restart, would answer the same
		// position with a reset.
		c.askLog = true
	}
	c.pre = appendRetry(nil)
	if from == nil {
		// The position the stream starts from, so a client whose
		// connection drops before the first event resumes from here
		// rather than from whatever is newest when it reconnects. (A
		// resuming client already holds its position.)
		c.pre = append(c.pre, "id: "...)
		c.pre = strconv.AppendUint(c.pre, c.last, 10)
		c.pre = append(c.pre, '\n')
	}
	c.pre = append(c.pre, connectedText...)
	stop := func(reason endReason, text []byte) { h.finish(sub, reason, text) }
	if !h.catchUp(ctx, sub, &c, stop) {
		return
	}
	if h.goLive(sub, c.last, stop) {
		go h.watch(sub)
	}
}

// rejoin catches up, from the log, a live stream the dispatcher found
// behind its window: a client reading more slowly than the changes come,
// for a while. The stream goes back to the dispatcher once it has caught
// up. Its watch goes on meanwhile, so it ends as a live stream does.
func (h *Hub) rejoin(sub *subscriber) {
	ctx := context.Background() // the request has returned; each wait and read has its own bound
	stop := func(reason endReason, text []byte) { h.end(sub, reason, text) }
	head, _, err := h.feed.ChangeHead(ctx)
	if err != nil {
		stop(storeFailed, hint(behindText))
		return
	}
	c := catchUp{last: sub.last, allowedLag: uint64(h.limits.MaxLag)}
	if c.last < head {
		c.allowedLag += head - c.last
		c.replayedUpTo = head
	}
	if h.catchUp(ctx, sub, &c, stop) {
		h.goLive(sub, c.last, stop)
	}
}

// catchUp is where a catch-up stands.
type catchUp struct {
	last uint64 // the position sent up to
	// replayedUpTo is the last position sent as the messages are now
	// (see filter.gather); changes after it are live.
	replayedUpTo uint64
	allowedLag   uint64 // how far behind the head the stream may fall
	askLog       bool   // whether the log is still to say it holds last
	pre          []byte // the stream's own bytes, sent before the next events
	authorsGone  map[uint64]bool
}

// catchUp sends sub the changes after c.last until it reaches the head,
// and reports whether the stream goes on; when it does not, it was ended
// with stop.
//
// Each batch is one write: at most catchUpWriteBytes of the window's
// events, or one batch of the log behind it. It takes those bytes from
// its account's share and the hub's catch-up budget before it reads or
// gathers anything (see budget.go), and gives them back once the write has
// returned: the events themselves are the window's, or a replay's shared
// with other streams, never copied for the stream. A catch-up that cannot
// get its bytes within WriteTimeout is told to reconnect later.
func (h *Hub) catchUp(ctx context.Context, sub *subscriber, c *catchUp, stop func(endReason, []byte)) bool {
	if c.authorsGone == nil {
		c.authorsGone = map[uint64]bool{} // whether each author's account was deleted
	}
	for {
		select {
		case <-h.closing:
			stop(shuttingDown, append(c.pre, hint(shutdownText)...))
			return false
		default:
		}
		head, _, err := h.feed.ChangeHead(ctx)
		var evs []*event
		var window []*event
		if err == nil {
			window, err = h.window.upTo(ctx, head)
		}
		switch {
		case err != nil:
		case c.last > head:
			err = model.ErrChangeUnknown
		default:
			evs, err = eventsAfter(window, c.last, head)
			if err == nil && c.askLog && c.last < head {
				// Served from the window; a position behind it is read
				// from the log below, which answers for itself.
				_, _, err = h.feed.ChangesAfter(ctx, c.last, 1)
			}
			c.askLog = false
		}
		waitCtx, cancel := context.WithTimeout(ctx, h.limits.WriteTimeout)
		var hd held
		replayed := false
		switch {
		case errors.Is(err, errBehind):
			replayed = true
			if hd, err = h.takeCatchUp(waitCtx, sub.account, replayRenderBytes); err == nil {
				evs, head, err = h.replays.after(waitCtx, c.last)
			}
			if err == nil && len(evs) == 0 && c.last < head {
				err = model.ErrChangeUnknown // a hole in the log: never wait on it
			}
		case err == nil && len(evs) > 0:
			hd, err = h.takeCatchUp(waitCtx, sub.account, catchUpWriteBytes)
		}
		evs = evs[:min(len(evs), streamBatch)]
		if err == nil {
			err = h.askAfterAuthors(ctx, sub.filter, evs, c.authorsGone, c.replayedUpTo)
		}
		var out net.Buffers
		bytes := 0
		if err == nil {
			var n int
			out, bytes, n = sub.filter.gather(net.Buffers{c.pre}, evs, catchUpWriteBytes, c.authorsGone, c.replayedUpTo)
			evs = evs[:n]
			if !replayed {
				// The window's events are the window's memory: the write
				// holds only what it sends. A replay's batch is held whole
				// until the write returns.
				h.keep(&hd, bytes)
			}
		}
		cancel()
		switch {
		case errors.Is(err, model.ErrChangeUnknown):
			h.giveBack(hd)
			// The client's position was trimmed away, or was never ours:
			// tell it to reload, and go on from the head.
			c.last = head
			c.pre = append(c.pre, "id: "...)
			c.pre = strconv.AppendUint(c.pre, head, 10)
			c.pre = append(c.pre, resetText...)
			continue
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			h.giveBack(hd)
			stop(serverBusy, append(c.pre, hint(busyText)...))
			return false
		case err != nil:
			h.giveBack(hd)
			stop(storeFailed, nil) // the client reconnects and resumes
			return false
		}
		if len(c.pre) > 0 || bytes > 0 {
			_ = sub.conn.SetWriteDeadline(time.Now().Add(h.limits.WriteTimeout))
			_, err := out.WriteTo(sub.conn)
			h.giveBack(hd)
			if err != nil {
				reason := clientLeft
				if errors.Is(err, os.ErrDeadlineExceeded) {
					reason = clientStalled
				}
				stop(reason, nil)
				return false
			}
			c.pre = nil
		} else {
			h.giveBack(hd)
		}
		if len(evs) == 0 {
			return true
		}
		c.last = evs[len(evs)-1].seq
		if newest, _, err := h.feed.ChangeHead(ctx); err == nil && newest-c.last > c.allowedLag {
			stop(fellBehind, hint(behindText))
			return false
		}
	}
}

// goLive hands a caught-up stream at position last to the dispatcher,
// and reports whether it is live; when it is not, it was ended with stop.
func (h *Hub) goLive(sub *subscriber, last uint64, stop func(endReason, []byte)) bool {
	// From here the dispatcher's watchdog bounds writes, not deadlines.
	_ = sub.conn.SetWriteDeadline(time.Time{})
	sub.last, sub.lastSend = last, time.Now()
	if !h.register(sub) {
		stop(shuttingDown, hint(shutdownText))
		return false
	}
	// A token revoked before the dispatcher had the stream would otherwise
	// go unnoticed until the periodic check.
	if fails, reason := h.tokenFails(sub); fails {
		h.end(sub, reason, nil)
	}
	return true
}

// askAfterAuthors notes in authorsGone whether the authors of the events
// of evs that f sends still have their accounts, asking about those it
// does not know yet in one read. Deleting an account takes everything of
// it out of sight, and a stream catching up on the changes it missed must
// not show them again: it gets their deletions alone. (A stream that was
// live when they were posted saw them then.) On an error the catch-up
// ends, and the map with it.
func (h *Hub) askAfterAuthors(ctx context.Context, f filter, evs []*event, authorsGone map[uint64]bool, replayedUpTo uint64) error {
	var unknown []uint64
	for _, ev := range evs {
		// A deletion shows only an ID, and has no author.
		if _, known := authorsGone[ev.author]; ev.author == 0 || known {
			continue
		}
		if send, _ := f.sends(ev, ev.seq <= replayedUpTo); send {
			authorsGone[ev.author] = false // until the read below says otherwise
			unknown = append(unknown, ev.author)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.limits.StoreTimeout)
	missing, err := h.tokens.MissingUsers(ctx, unknown)
	cancel()
	if err != nil {
		return err
	}
	for _, id := range missing {
		authorsGone[id] = true
	}
	return nil
}

// finish writes a last text, when there is one, and ends for reason a
// stream the dispatcher never had.
func (h *Hub) finish(sub *subscriber, reason endReason, text []byte) {
	sub.claimEnd(reason)
	if len(text) > 0 {
		_ = sub.conn.SetWriteDeadline(time.Now().Add(streamFinalWrite))
		_, _ = sub.conn.Write(text)
	}
	_ = sub.conn.Close()
	h.logEnd(sub) // before the place is given back, as in watch
	sub.release()
}
