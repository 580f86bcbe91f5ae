package stream

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"herald/model"
)

// streamFinalWrite bounds the write of a stream's last words (a retry
// hint), and so how long a shutdown waits for them.
const streamFinalWrite = time.Second

// streamReadLimit is how much a client may send after its request before
// its stream is cut: SSE clients send nothing.
const streamReadLimit = 4 << 10

// subscriber is one live stream on its hijacked connection.
//
// Until it is caught up, the request's goroutine writes to it (start).
// From then on the dispatcher owns last and lastSend, and hands each write
// to a goroutine of its own, so a client that does not read holds up
// nobody; a small goroutine per stream waits for the client to leave.
type subscriber struct {
	conn    net.Conn
	filter  filter
	userID  uint64
	account *account // what it shares with the account's other streams
	token   model.TokenHash
	expires time.Time
	release func()    // gives back its place under the limits
	remote  string    // the client's address, for the log
	started time.Time // when its connection was taken over, for the log

	last     uint64      // the change the stream has been sent up to
	lastSend time.Time   // when the dispatcher last handed it bytes
	pieces   net.Buffers // storage for its writes' pieces, kept between rounds when small
	writing  atomic.Bool
	// ended is 0 while the stream runs, then 1 + the endReason of whoever
	// ended it first: one word, so the reason is there as soon as anyone
	// can see the stream ended.
	ended atomic.Int32
}

// isEnded reports whether anyone has ended the stream.
func (sub *subscriber) isEnded() bool { return sub.ended.Load() != 0 }

// endReason says why a stream ended, in its log line: an operator tells a
// client that left from one the server cut off, and why.
type endReason int32

const (
	clientLeft endReason = iota
	clientTalked
	tokenEnded
	clientStalled
	fellBehind
	storeFailed
	shuttingDown
	serverBusy
)

func (r endReason) String() string {
	switch r {
	case clientLeft:
		return "the client closed the connection"
	case clientTalked:
		return "the client sent more than its request"
	case tokenEnded:
		return "its token expired or no longer works"
	case clientStalled:
		return "the client stopped reading"
	case fellBehind:
		return "it fell too far behind"
	case storeFailed:
		return "the store failed"
	case shuttingDown:
		return "the server is shutting down"
	case serverBusy:
		return "the server had no memory to spare for it"
	default:
		return "unknown"
	}
}

// claimEnd marks sub ended for reason and reports whether it did: only the
// first to end a stream says why.
func (sub *subscriber) claimEnd(reason endReason) bool {
	return sub.ended.CompareAndSwap(0, 1+int32(reason))
}

// logEnd writes a stream's last log line; its access-log line was written
// once it had caught up, when its handler returned.
func (h *Hub) logEnd(sub *subscriber) {
	h.log.LogAttrs(context.Background(), slog.LevelInfo, "stream ended",
		slog.Uint64("user", sub.userID),
		slog.String("remote", sub.remote),
		slog.Duration("duration", time.Since(sub.started)),
		slog.String("reason", endReason(sub.ended.Load()-1).String()),
	)
}

// watch waits for the client to go away (or for anyone to close the
// connection), then takes the stream out of the hub. Clients send nothing
// after their request; a client that sends more than a little is cut off.
func (h *Hub) watch(sub *subscriber) {
	var b [64]byte
	reason := clientTalked
	for read := 0; read < streamReadLimit; {
		n, err := sub.conn.Read(b[:])
		if err != nil {
			reason = clientLeft
			break
		}
		read += n
	}
	sub.claimEnd(reason)
	_ = sub.conn.Close()
	h.mu.Lock()
	if i := slices.Index(h.live, sub); i >= 0 {
		last := len(h.live) - 1
		h.live[i] = h.live[last]
		h.live[last] = nil
		h.live = h.live[:last]
	}
	h.mu.Unlock()
	// Logged before the place is given back: shutdown waits for the
	// places, and its last streams' lines must be out before it exits.
	h.logEnd(sub)
	sub.release()
}

// send hands out to a goroutine that writes it to sub; the dispatcher
// never waits on a client. A round's write holds its round's bytes of
// liveMemory (hold), given back when the round's last write returns.
func (h *Hub) send(sub *subscriber, out net.Buffers, hold *roundHold, now time.Time) {
	sub.writing.Store(true)
	sub.lastSend = now
	go func() {
		_, err := out.WriteTo(sub.conn)
		if hold != nil {
			hold.done() // wakes the dispatcher when it gives bytes back
		}
		if err != nil {
			_ = sub.conn.Close() // watch takes it out of the hub
			return
		}
		sub.writing.Store(false)
		h.wake() // commits that came during the write are waiting for it
	}()
}

// end cuts sub off for reason, first writing text when there is one and
// the stream is not in the middle of a write. Closing the connection ends
// its watch, which takes it out of the hub.
func (h *Hub) end(sub *subscriber, reason endReason, text []byte) {
	if !sub.claimEnd(reason) {
		return
	}
	if len(text) == 0 || sub.writing.Load() {
		_ = sub.conn.Close()
		return
	}
	sub.writing.Store(true)
	go func() {
		_ = sub.conn.SetWriteDeadline(time.Now().Add(streamFinalWrite))
		_, _ = sub.conn.Write(text)
		_ = sub.conn.Close()
	}()
}

// tokenFails reports whether the stream must end because its token no
// longer authenticates, and why: the token, or a store that could not
// say (the stream ends then too, and its client resumes elsewhere or
// later, where the check can be made).
func (h *Hub) tokenFails(sub *subscriber) (bool, endReason) {
	ctx, cancel := context.WithTimeout(context.Background(), h.limits.StoreTimeout)
	defer cancel()
	_, _, err := h.tokens.Authenticate(ctx, sub.token)
	switch {
	case err == nil:
		return false, 0
	case errors.Is(err, model.ErrUnauthorized):
		return true, tokenEnded
	default:
		return true, storeFailed
	}
}
