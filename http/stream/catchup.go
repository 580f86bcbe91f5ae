package stream

import (
	"context"
	"errors"
	"os"
	"strconv"
	"time"

	"herald/model"
)

// start catches sub up from the position it resumes from (or from head,
// the log's head when its status went out), then hands it to the
// dispatcher, all on the request's goroutine. The stream is cut if it
// falls further behind while catching up.
func (h *Hub) start(ctx context.Context, sub *subscriber, from *uint64, head uint64) {
	last := head
	allowedLag := uint64(h.limits.MaxLag)
	if from != nil {
		last = *from
		if last < head {
			allowedLag += head - last
		}
	}
	buf := appendRetry(nil)
	if from == nil {
		// The position the stream starts from, so a client whose
		// connection drops before the first event resumes from here
		// rather than from whatever is newest when it reconnects. (A
		// resuming client already holds its position.)
		buf = append(buf, "id: "...)
		buf = strconv.AppendUint(buf, last, 10)
		buf = append(buf, '\n')
	}
	buf = append(buf, connectedText...)
	// Whether a position can be resumed is the log's to say: the window may
	// still hold changes the log has trimmed, and another instance, or this
	// one after a restart, would answer the same position with a reset.
	askLog := from != nil
	authorsGone := map[uint64]bool{} // whether each author's account was deleted
	for {
		select {
		case <-h.closing:
			h.finish(sub, shuttingDown, append(buf, hint(shutdownText)...))
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
			evs = evs[:min(len(evs), streamBatch)]
			if err == nil && askLog && last < head {
				// Served from the window; a position behind it is read
				// from the log below, which answers for itself.
				_, _, err = h.feed.ChangesAfter(ctx, last, 1)
			}
			askLog = false
		}
		if errors.Is(err, errBehind) {
			evs, head, err = h.window.replay(ctx, last)
			if err == nil && len(evs) == 0 && last < head {
				err = model.ErrChangeUnknown // a hole in the log: never wait on it
			}
		}
		if err == nil {
			buf, err = h.appendShown(ctx, buf, sub.filter, evs, authorsGone)
		}
		switch {
		case errors.Is(err, model.ErrChangeUnknown):
			// The client's position was trimmed away, or was never ours:
			// tell it to reload, and go on from the head.
			last = head
			buf = append(buf, "id: "...)
			buf = strconv.AppendUint(buf, head, 10)
			buf = append(buf, resetText...)
			continue
		case err != nil:
			h.finish(sub, storeFailed, nil) // the client reconnects and resumes
			return
		}
		if len(buf) > 0 {
			_ = sub.conn.SetWriteDeadline(time.Now().Add(h.limits.WriteTimeout))
			if _, err := sub.conn.Write(buf); err != nil {
				reason := clientLeft
				if errors.Is(err, os.ErrDeadlineExceeded) {
					reason = clientStalled
				}
				h.finish(sub, reason, nil)
				return
			}
			buf = buf[:0]
		}
		if len(evs) == 0 {
			break
		}
		last = evs[len(evs)-1].seq
		if newest, _, err := h.feed.ChangeHead(ctx); err == nil && newest-last > allowedLag {
			h.finish(sub, fellBehind, append(buf, hint(behindText)...))
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

// appendShown appends to buf the texts of the events of evs that f passes
// and whose authors still have their accounts. Deleting an account takes
// everything of it out of sight, and a stream catching up on the changes
// it missed must not show them again: it gets their deletions alone. (A
// stream that was live when they were posted saw them then.) authorsGone
// keeps, for one catch-up, whether each author asked about was deleted;
// the authors not yet in it are asked about in one read. On an error the
// catch-up ends, and the map with it.
func (h *Hub) appendShown(ctx context.Context, buf []byte, f filter, evs []*event, authorsGone map[uint64]bool) ([]byte, error) {
	shown := make([]*event, 0, len(evs))
	var unknown []uint64
	for _, ev := range evs {
		if !f.passes(ev) {
			continue
		}
		shown = append(shown, ev)
		// A deletion shows only an ID, and has no author.
		if _, known := authorsGone[ev.author]; ev.author != 0 && !known {
			authorsGone[ev.author] = false // until the read below says otherwise
			unknown = append(unknown, ev.author)
		}
	}
	if len(unknown) > 0 {
		ctx, cancel := context.WithTimeout(ctx, h.limits.StoreTimeout)
		missing, err := h.tokens.MissingUsers(ctx, unknown)
		cancel()
		if err != nil {
			return buf, err
		}
		for _, id := range missing {
			authorsGone[id] = true
		}
	}
	for _, ev := range shown {
		if !authorsGone[ev.author] {
			buf = append(buf, ev.text...)
		}
	}
	return buf, nil
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
