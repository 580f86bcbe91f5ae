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
	// catchUps and lives bound the bytes streams hold in flight (see
	// budget.go); replays reads the log behind the window for catch-ups.
	catchUps, lives *budget
	replays         *replays

	mu      sync.Mutex
	perUser map[uint64]*account // each account that has streams open
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
		catchUps: newBudget(catchUpMemory), lives: newBudget(liveMemory),
		perUser: make(map[uint64]*account), closing: make(chan struct{}), poke: make(chan struct{}, 1),
	}
	h.lives.freed = h.wake
	h.replays = newReplays(feed)
	h.window.feed, h.window.replays = feed, h.replays
	// Streams start at the head; nothing before it needs rendering. (If
	// the store cannot say, the window starts afresh when first needed.)
	h.window.rendered, _, _ = feed.ChangeHead(context.Background())
	return h
}

// account is what the streams of one account share.
type account struct {
	streams int // open
	// share is what the account's catch-ups hold at once (accountMemory):
	// two batches of the log, or four writes of the window's events.
	share *budget
}

// admit counts a new stream of userID against the limits; release undoes
// it. It returns the account's share of the hub. Beyond a limit it
// returns model.ErrLimited, for the client to retry later.
func (h *Hub) admit(userID uint64) (release func(), acct *account, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	acct = h.perUser[userID]
	n := 0
	if acct != nil {
		n = acct.streams
	}
	switch {
	case h.closed:
		return nil, nil, errShuttingDown
	case h.total >= h.limits.Total:
		return nil, nil, &model.Error{Kind: model.ErrLimited, RetryAfter: streamRetryAfter,
			Detail: "the server has as many live streams open as it allows; try again later"}
	case n >= h.limits.PerUser:
		return nil, nil, &model.Error{Kind: model.ErrLimited, RetryAfter: streamRetryAfter,
			Detail: "this account has " + strconv.Itoa(n) + " live streams open, the most it may; close one first"}
	}
	if acct == nil {
		acct = &account{share: newBudget(accountMemory)}
		h.perUser[userID] = acct
	}
	acct.streams++
	h.total++
	h.streams.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.total--
			if acct.streams--; acct.streams == 0 {
				delete(h.perUser, userID)
			}
			h.streams.Done()
		})
	}, acct, nil
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
