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
// dispatcher, all on the request's goroutine. The stream is cut if it
// falls further behind while catching up.
//
// Each batch of the catch-up is one write of at most catchUpWriteBytes of
// events, whose bytes it holds from the hub's budget until the write
// returns: the events themselves are the window's, or a replay's shared
// with other streams, never copied for the stream. A catch-up that finds
// the budget spent waits, holding nothing, for up to WriteTimeout.
func (h *Hub) start(ctx context.Context, sub *subscriber, from *uint64, head uint64) {
	last := head
	allowedLag := uint64(h.limits.MaxLag)
	// The changes up to the head as the status went out are what a
	// resuming client missed, replayed as the messages are now; the rest
	// are live (see filter.gather).
	var replayedUpTo uint64
	if from != nil {
		last = *from
		if last < head {
			allowedLag += head - last
			replayedUpTo = head
		}
	}
	// pre is what goes out before the next batch's events: the stream's
	// own few bytes, never an event's.
	pre := appendRetry(nil)
	if from == nil {
		// The position the stream starts from, so a client whose
		// connection drops before the first event resumes from here
		// rather than from whatever is newest when it reconnects. (A
		// resuming client already holds its position.)
		pre = append(pre, "id: "...)
		pre = strconv.AppendUint(pre, last, 10)
		pre = append(pre, '\n')
	}
	pre = append(pre, connectedText...)
	// Whether a position can be resumed is the log's to say: the window may
	// still hold changes the log has trimmed, and another instance, or this
	// one after a restart, would answer the same position with a reset.
	askLog := from != nil
	authorsGone := map[uint64]bool{} // whether each author's account was deleted
	for {
		select {
		case <-h.closing:
			h.finish(sub, shuttingDown, append(pre, hint(shutdownText)...))
			return
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
		case last > head:
			err = model.ErrChangeUnknown
		default:
			evs, err = eventsAfter(window, last, head)
			if err == nil && askLog && last < head {
				// Served from the window; a position behind it is read
				// from the log below, which answers for itself.
				_, _, err = h.feed.ChangesAfter(ctx, last, 1)
			}
			askLog = false
		}
		// held is what this batch holds of the hub's budget: a replay's
		// render and write, taken before it reads the log; events of the
		// window, already in memory, only for their write.
		var held taken
		waitCtx, cancel := context.WithTimeout(ctx, h.limits.WriteTimeout)
		if errors.Is(err, errBehind) {
			err = h.takeReplay(waitCtx, sub.account)
			if err == nil {
				held = taken{bytes: replayRenderBytes, replay: true}
				evs, head, err = h.replays.after(waitCtx, last)
			}
			if err == nil && len(evs) == 0 && last < head {
				err = model.ErrChangeUnknown // a hole in the log: never wait on it
			}
		}
		evs = evs[:min(len(evs), streamBatch)]
		if err == nil {
			err = h.askAfterAuthors(ctx, sub.filter, evs, authorsGone, replayedUpTo)
		}
		var out net.Buffers
		bytes := 0
		if err == nil {
			var n int
			out, bytes, n = sub.filter.gather(net.Buffers{pre}, evs, catchUpWriteBytes, authorsGone, replayedUpTo)
			evs = evs[:n]
			if held.bytes == 0 && bytes > 0 {
				if err = h.budget.acquire(waitCtx, bytes); err == nil {
					held.bytes = bytes
				}
			}
		}
		cancel()
		switch {
		case errors.Is(err, model.ErrChangeUnknown):
			h.giveBack(sub.account, held)
			// The client's position was trimmed away, or was never ours:
			// tell it to reload, and go on from the head.
			last = head
			pre = append(pre, "id: "...)
			pre = strconv.AppendUint(pre, head, 10)
			pre = append(pre, resetText...)
			continue
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			h.giveBack(sub.account, held)
			h.finish(sub, serverBusy, append(pre, hint(busyText)...))
			return
		case err != nil:
			h.giveBack(sub.account, held)
			h.finish(sub, storeFailed, nil) // the client reconnects and resumes
			return
		}
		if len(pre) > 0 || bytes > 0 {
			_ = sub.conn.SetWriteDeadline(time.Now().Add(h.limits.WriteTimeout))
			_, err := out.WriteTo(sub.conn)
			h.giveBack(sub.account, held)
			if err != nil {
				reason := clientLeft
				if errors.Is(err, os.ErrDeadlineExceeded) {
					reason = clientStalled
				}
				h.finish(sub, reason, nil)
				return
			}
			pre = nil
		} else {
			h.giveBack(sub.account, held)
		}
		if len(evs) == 0 {
			break
		}
		last = evs[len(evs)-1].seq
		if newest, _, err := h.feed.ChangeHead(ctx); err == nil && newest-last > allowedLag {
			h.finish(sub, fellBehind, hint(behindText))
			return
		}
	}
	// From here the dispatcher's watchdog bounds writes, not deadlines.
	_ = sub.conn.SetWriteDeadline(time.Time{})
	sub.last, sub.lastSend = last, time.Now()
	if !h.register(sub) {
		h.finish(sub, shuttingDown, hint(shutdownText))
		return
	}
	// A token revoked before the dispatcher had the stream would otherwise
	// go unnoticed until the periodic check.
	if fails, reason := h.tokenFails(sub); fails {
		h.end(sub, reason, nil)
	}
	go h.watch(sub)
}

// takeReplay waits, until ctx is done, for a turn of acct's to read the
// log, and for replayRenderBytes of the hub's budget.
func (h *Hub) takeReplay(ctx context.Context, acct *account) error {
	select {
	case acct.replays <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := h.budget.acquire(ctx, replayRenderBytes); err != nil {
		<-acct.replays
		return err
	}
	return nil
}

// taken is what a batch of a catch-up holds of the hub's budget, and
// whether it holds a turn of its account's to read the log.
type taken struct {
	bytes  int
	replay bool
}

// giveBack returns what a batch of acct's stream held.
func (h *Hub) giveBack(acct *account, held taken) {
	if held.bytes > 0 {
		h.budget.release(held.bytes)
	}
	if held.replay {
		<-acct.replays
	}
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
