package stream

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"herald/model"
)

// streamRetryAfter is how long a client refused by a limit is asked to
// wait.
const streamRetryAfter = 5 * time.Second

// Hub renders changes once, admits streams within their limits, and sends
// every registered stream what it has not had yet.
type Hub struct {
	feed   Feed
	tokens Tokens
	limits Limits
	now    func() time.Time // the store's clock, which expires tokens
	log    *slog.Logger     // a line for each stream that ends
	window window

	mu      sync.Mutex
	perUser map[uint64]int // open streams of each account that has any
	total   int
	closing chan struct{} // closed when the server shuts down
	closed  bool
	streams sync.WaitGroup // every admitted stream, until it releases its place
	live    []*subscriber  // streams caught up and served by the dispatcher
	running bool           // the dispatcher runs; it does while live is not empty

	poke chan struct{} // wakes the dispatcher; holds at most one wake

	// afterStatus, when set (by tests), runs once a stream's status has
	// gone out and before the stream starts.
	afterStatus func()
}

// New returns a hub serving the changes of feed, whose streams check their
// tokens with tokens, expire them by the clock now, are bounded by limits,
// and say in log why each ended (nil discards).
func New(feed Feed, tokens Tokens, limits Limits, now func() time.Time, log *slog.Logger) *Hub {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{
		feed: feed, tokens: tokens, limits: limits.withDefaults(), now: now, log: log,
		window:  window{feed: feed},
		perUser: make(map[uint64]int), closing: make(chan struct{}), poke: make(chan struct{}, 1),
	}
	// Streams start at the head; nothing before it needs rendering. (If
	// the store cannot say, the window starts afresh when first needed.)
	h.window.rendered, _, _ = feed.ChangeHead(context.Background())
	return h
}

// admit counts a new stream of userID against the limits; release undoes
// it. Beyond a limit it returns model.ErrLimited, for the client to retry
// later.
func (h *Hub) admit(userID uint64) (release func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch n := h.perUser[userID]; {
	case h.closed:
		return nil, errShuttingDown
	case h.total >= h.limits.Total:
		return nil, &model.Error{Kind: model.ErrLimited, RetryAfter: streamRetryAfter,
			Detail: "the server has as many live streams open as it allows; try again later"}
	case n >= h.limits.PerUser:
		return nil, &model.Error{Kind: model.ErrLimited, RetryAfter: streamRetryAfter,
			Detail: "this account has " + strconv.Itoa(n) + " live streams open, the most it may; close one first"}
	}
	h.perUser[userID]++
	h.total++
	h.streams.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.total--
			if h.perUser[userID]--; h.perUser[userID] == 0 {
				delete(h.perUser, userID)
			}
			h.streams.Done()
		})
	}, nil
}

// errShuttingDown refuses streams while the server stops.
var errShuttingDown = &model.Error{Kind: model.ErrUnavailable, Detail: "the server is shutting down", RetryAfter: streamRetryAfter}

// Close ends every stream, each with a hint to reconnect a little later,
// and refuses new ones; it waits a few seconds at most for the hints to go
// out. Streams run on connections taken from net/http, which
// http.Server.Shutdown neither waits for nor closes: call Close before it.
func (h *Hub) Close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.closing)
	}
	h.mu.Unlock()
	ended := make(chan struct{})
	go func() {
		h.streams.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(2 * streamFinalWrite):
	}
}

// wake has the dispatcher run a round soon; it never blocks.
func (h *Hub) wake() {
	select {
	case h.poke <- struct{}{}:
	default:
	}
}
