package stream

import (
	"context"
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
	token   model.TokenHash
	expires time.Time
	release func() // gives back its place under the limits

	last     uint64      // the change the stream has been sent up to
	lastSend time.Time   // when the dispatcher last handed it bytes
	pieces   net.Buffers // storage for its writes' pieces, kept between rounds when small
	writing  atomic.Bool
	ended    atomic.Bool
}

// watch waits for the client to go away (or for anyone to close the
// connection), then takes the stream out of the hub. Clients send nothing
// after their request; a client that sends more than a little is cut off.
func (h *Hub) watch(sub *subscriber) {
	var b [64]byte
	for read := 0; read < streamReadLimit; {
		n, err := sub.conn.Read(b[:])
		if err != nil {
			break
		}
		read += n
	}
	sub.ended.Store(true)
	_ = sub.conn.Close()
	h.mu.Lock()
	if i := slices.Index(h.live, sub); i >= 0 {
		last := len(h.live) - 1
		h.live[i] = h.live[last]
		h.live[last] = nil
		h.live = h.live[:last]
	}
	h.mu.Unlock()
	sub.release()
}

// send hands out to a goroutine that writes it to sub; the dispatcher
// never waits on a client.
func (h *Hub) send(sub *subscriber, out net.Buffers, now time.Time) {
	sub.writing.Store(true)
	sub.lastSend = now
	go func() {
		if _, err := out.WriteTo(sub.conn); err != nil {
			_ = sub.conn.Close() // watch takes it out of the hub
			return
		}
		sub.writing.Store(false)
		h.wake() // commits that came during the write are waiting for it
	}()
}

// end cuts sub off, first writing text when there is one and the stream is
// not in the middle of a write. Closing the connection ends its watch,
// which takes it out of the hub.
func (h *Hub) end(sub *subscriber, text []byte) {
	if !sub.ended.CompareAndSwap(false, true) {
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

// tokenWorks reports whether the stream's token still authenticates.
func (h *Hub) tokenWorks(sub *subscriber) bool {
	ctx, cancel := context.WithTimeout(context.Background(), h.limits.StoreTimeout)
	defer cancel()
	_, _, err := h.tokens.Authenticate(ctx, sub.token)
	return err == nil
}
