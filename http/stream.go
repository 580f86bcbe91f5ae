package http

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"herald/bolt"
)

// The live stream: GET /api/messages/stream, Server-Sent Events of the
// store's change log (see bolt/changes.go) through the filters of search.
//
// Fan-out without a copy per subscriber: the hub renders each change once
// into the bytes of its event and keeps the newest hubMemory of them in
// one shared, append-only window. Each stream is a loop in its own request
// goroutine that takes the events after its position from the window,
// writes those its filter passes, and waits for the next commit. A stream
// whose position has left the window (it resumed from long ago) reads the
// log from disk until it catches up. So nobody waits for anybody: a slow
// client only falls behind in the window, and is cut off with a retry hint
// once it is MaxLag changes behind, or when one write takes longer than
// WriteTimeout.

// StreamLimits tune live streams; zero values take the defaults.
type StreamLimits struct {
	PerUser int // concurrent streams one account may hold
	Total   int // concurrent streams in all
	// Heartbeat is how long a stream may stay silent before a comment line
	// tells proxies (and the client) it is alive.
	Heartbeat time.Duration
	// WriteTimeout bounds one write to a stream; a client that does not
	// read for that long is disconnected.
	WriteTimeout time.Duration
	// MaxLag is how many changes a live stream may fall behind the newest
	// before it is disconnected with a retry hint.
	MaxLag int
	// TokenCheck is how often a stream checks that its token still works,
	// on top of the check every deletion of one of its account's tokens
	// triggers at once (bolt.DB.TokenDeleted) and the timer for the end of
	// the token's lifetime: a safety net, and what catches expiry on a
	// clock other than the wall clock (Config.Now).
	TokenCheck time.Duration
}

// Stream defaults.
const (
	DefaultStreamsPerUser     = 16
	DefaultStreams            = 10000
	DefaultStreamHeartbeat    = 25 * time.Second // below the 60 s idle timeout of common proxies
	DefaultStreamWriteTimeout = 10 * time.Second
	DefaultStreamMaxLag       = 1024
	DefaultStreamTokenCheck   = time.Minute
)

// The hub keeps at most hubMemory rendered events and about hubMemoryBytes
// of them (one event may render 60 KB of JSON). A lag limit beyond the
// window would send live streams to the disk, so MaxLag is capped by it.
const (
	hubMemory      = 4096
	hubMemoryBytes = 16 << 20
)

// streamBatch bounds the changes one turn of a stream's loop takes, so a
// stream catching up writes in pieces and checks its lag between them.
const streamBatch = 256

// retryMillis is the reconnection delay every stream suggests to its
// client in a retry: field.
const retryMillis = 3000

// streamRetryAfter is the Retry-After of a stream refused by a limit.
const streamRetryAfter = 5 * time.Second

func (l StreamLimits) withDefaults() StreamLimits {
	set := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	setDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	set(&l.PerUser, DefaultStreamsPerUser)
	set(&l.Total, DefaultStreams)
	set(&l.MaxLag, DefaultStreamMaxLag)
	l.MaxLag = min(l.MaxLag, hubMemory)
	setDur(&l.Heartbeat, DefaultStreamHeartbeat)
	setDur(&l.WriteTimeout, DefaultStreamWriteTimeout)
	setDur(&l.TokenCheck, DefaultStreamTokenCheck)
	return l
}

// event is one change, rendered once for every stream that sends it.
type event struct {
	seq    uint64
	owner  string              // bolt.EmailKey of the message's owner
	terms  map[string]struct{} // the message's words after the change
	before map[string]struct{} // and before it, for an update
	text   []byte              // id:, event: and data: lines, blank line included
	size   int                 // memory it holds, roughly
}

func renderEvent(ch *bolt.Change) *event {
	ev := &event{seq: ch.Seq, owner: bolt.EmailKey(ch.Message.OwnerEmail), terms: bolt.ContentTerms(ch.Message.Content)}
	if ch.Kind == bolt.MessageUpdated {
		ev.before = bolt.ContentTerms(ch.Before)
	}
	b := make([]byte, 0, 96+len(ch.Message.Content))
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, ch.Seq, 10)
	b = append(b, "\nevent: "...)
	b = append(b, ch.Kind.String()...)
	b = append(b, "\ndata: "...)
	if ch.Kind == bolt.MessageDeleted {
		b = append(b, `{"id":`...)
		b = strconv.AppendUint(b, ch.Message.ID, 10)
		b = append(b, '}')
	} else {
		// JSON escapes every line break, so the payload is one data: line.
		b = appendMessageJSON(b, &ch.Message)
	}
	ev.text = append(b, "\n\n"...)
	// The term sets cost about what the text they came from does.
	ev.size = 2*len(ev.text) + len(ch.Before)
	return ev
}

// streamFilter is what a stream asked for: search's q and owner.
type streamFilter struct {
	terms []string
	owner string // bolt.EmailKey; "" for everyone
}

// passes reports whether a stream with this filter sends ev. An update
// passes when the message matched before it or matches after it, so a
// client showing a filtered list learns of a message that left it.
func (f *streamFilter) passes(ev *event) bool {
	if f.owner != "" && ev.owner != f.owner {
		return false
	}
	return hasAll(ev.terms, f.terms) || (ev.before != nil && hasAll(ev.before, f.terms))
}

func hasAll(set map[string]struct{}, terms []string) bool {
	for _, t := range terms {
		if _, ok := set[t]; !ok {
			return false
		}
	}
	return true
}

// errBehind: the position asked for has left the hub's window.
var errBehind = errors.New("position older than the hub's window")

// streamHub renders changes once and admits streams within their limits.
type streamHub struct {
	db     *bolt.DB
	limits StreamLimits
	now    func() time.Time // the store's clock, which expires tokens

	// windowMu guards the window; rendering holds it, so admissions take
	// their own lock rather than wait on a render.
	windowMu    sync.Mutex
	window      []*event // the newest rendered events, oldest first, contiguous
	windowBytes int      // size of window, summed
	rendered    uint64   // the change the window ends at

	mu      sync.Mutex
	perUser map[uint64]int // open streams of each account that has any
	total   int
	closing chan struct{} // closed when the server shuts down
	closed  bool
}

func newStreamHub(db *bolt.DB, limits StreamLimits, now func() time.Time) *streamHub {
	h := &streamHub{db: db, limits: limits.withDefaults(), now: now, perUser: make(map[uint64]int), closing: make(chan struct{})}
	if db != nil {
		// Streams start at the head; nothing before it needs rendering.
		h.rendered, _ = db.ChangeHead()
	}
	return h
}

// admit counts a new stream of userID against the limits; release undoes
// it. Beyond a limit it returns a 429 for the client to retry later.
func (h *streamHub) admit(userID uint64) (release func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch n := h.perUser[userID]; {
	case h.closed:
		return nil, errShuttingDown
	case h.total >= h.limits.Total:
		return nil, tooManyRequests("the server has as many live streams open as it allows; try again later", streamRetryAfter)
	case n >= h.limits.PerUser:
		return nil, tooManyRequests("this account has "+strconv.Itoa(n)+" live streams open, the most it may; close one first", streamRetryAfter)
	}
	h.perUser[userID]++
	h.total++
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.total--
		if h.perUser[userID]--; h.perUser[userID] == 0 {
			delete(h.perUser, userID)
		}
	}, nil
}

// close ends every stream; new ones are refused.
func (h *streamHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.closing)
	}
}

// after returns up to streamBatch events after position last, the head
// of the log, and a channel closed by the next commit. The channel is taken
// before the events are read, so a commit landing in between still wakes
// the caller. It returns errBehind when last has left the window and
// bolt.ErrChangeUnknown for a position beyond the head.
func (h *streamHub) after(last uint64) ([]*event, uint64, <-chan struct{}, error) {
	head, wait := h.db.ChangeHead()
	switch {
	case last > head:
		return nil, head, wait, bolt.ErrChangeUnknown
	case last == head:
		return nil, head, wait, nil
	}
	h.windowMu.Lock()
	defer h.windowMu.Unlock()
	if err := h.renderUpTo(head); err != nil {
		return nil, head, wait, err
	}
	if len(h.window) == 0 || last+1 < h.window[0].seq {
		return nil, head, wait, errBehind
	}
	i := int(last + 1 - h.window[0].seq)
	j := min(len(h.window), i+streamBatch)
	// The window only ever appends past its end or drops from its front,
	// so this slice stays valid after the lock is released.
	return h.window[i:j:j], head, wait, nil
}

// renderUpTo brings the window up to head; h.windowMu is held. The first
// stream woken by a commit renders it for all; the others, with the same or
// an older head in hand, find it done.
func (h *streamHub) renderUpTo(head uint64) error {
	if head <= h.rendered {
		return nil
	}
	if head-h.rendered > hubMemory {
		// Nobody streamed for a long while: start the window afresh rather
		// than render what no live stream can want.
		h.window, h.windowBytes, h.rendered = nil, 0, head-hubMemory
	}
	for h.rendered < head {
		chs, _, err := h.db.ChangesAfter(h.rendered, streamBatch)
		if errors.Is(err, bolt.ErrChangeUnknown) {
			// Trimmed: streams that need it go to the log, which says so.
			h.window, h.windowBytes, h.rendered = nil, 0, head
			return nil
		}
		if err != nil {
			return err
		}
		if len(chs) == 0 {
			break
		}
		for _, ch := range chs {
			ev := renderEvent(ch)
			h.window = append(h.window, ev)
			h.windowBytes += ev.size
		}
		h.rendered = chs[len(chs)-1].Seq
	}
	// Drop from the front by reslicing: streams hold slices of the window
	// outside the lock, and append only writes past their end.
	drop := 0
	for len(h.window)-drop > 1 && (len(h.window)-drop > hubMemory || h.windowBytes > hubMemoryBytes) {
		h.windowBytes -= h.window[drop].size
		drop++
	}
	h.window = h.window[drop:]
	return nil
}

// replay reads up to streamBatch events after last from the log, for a
// stream whose position has left the window.
func (h *streamHub) replay(last uint64) ([]*event, uint64, error) {
	chs, head, err := h.db.ChangesAfter(last, streamBatch)
	if err != nil {
		return nil, head, err
	}
	evs := make([]*event, len(chs))
	for i, ch := range chs {
		evs[i] = renderEvent(ch)
	}
	return evs, head, nil
}

// streamParams are the parameters a stream takes.
var streamParams = []string{"lastEventId", "owner", "q"}

// streamMessages serves GET /api/messages/stream.
func (s *Server) streamMessages(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	params, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return badRequest("", "query string is malformed")
	}
	if err := checkParamNames(params, "the stream", streamParams); err != nil {
		return err
	}
	var filter streamFilter
	if filter.terms, err = parseQueryTerms(params); err != nil {
		return err
	}
	if owner := params.Get("owner"); owner != "" {
		filter.owner = bolt.EmailKey(bolt.NormalizeEmail(owner))
	}
	// The header is what a reconnecting EventSource sends, newer than the
	// parameter in the URL it was first opened with.
	resume, name := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if resume == "" {
		resume, name = params.Get("lastEventId"), "lastEventId"
	}
	var from *uint64
	if resume != "" {
		n, err := strconv.ParseUint(resume, 10, 64)
		if err != nil {
			return badRequest(name, "%s must be the id of an event this stream sent", name)
		}
		from = &n
	}

	u, tok, err := s.db.Authenticate(caller(r).tokenHash)
	if err != nil {
		return err
	}
	noteCaller(r, u)
	release, err := s.streams.admit(u.ID)
	if err != nil {
		return err
	}
	defer release()

	rc := http.NewResponseController(w)
	// The server's read timeout would otherwise end the stream: net/http
	// keeps reading the connection under it to notice a client leaving.
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no") // nginx would otherwise hold events back
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	st := &stream{
		hub: s.streams, db: s.db, w: w, rc: rc, filter: filter,
		userID: u.ID, token: caller(r).tokenHash, expires: tok.ExpiresAt,
	}
	st.run(r.Context(), from)
	return nil
}

// stream is one client's live stream.
type stream struct {
	hub     *streamHub
	db      *bolt.DB
	w       http.ResponseWriter
	rc      *http.ResponseController
	filter  streamFilter
	userID  uint64
	token   bolt.TokenHash
	expires time.Time
	buf     []byte
}

// run sends events until the client leaves, its token stops working, it
// falls too far behind, or the server shuts down.
func (st *stream) run(ctx context.Context, from *uint64) {
	limits := st.hub.limits
	head, _ := st.db.ChangeHead()
	last := head
	// A resuming client may start far behind; it is cut only if it falls
	// further behind while catching up, then MaxLag once live.
	allowedLag := uint64(limits.MaxLag)
	if from != nil {
		last = *from
		if last < head {
			allowedLag += head - last
		}
	}
	st.buf = append(st.buf[:0], "retry: "...)
	st.buf = strconv.AppendInt(st.buf, retryMillis, 10)
	st.buf = append(st.buf, "\n: connected\n\n"...)
	if st.send() != nil {
		return
	}

	c := &streamControls{
		heartbeat: time.NewTimer(limits.Heartbeat),
		expiry:    time.NewTimer(st.expires.Sub(st.hub.now())),
		check:     time.NewTicker(limits.TokenCheck),
		recheck:   st.db.TokenDeleted(st.userID),
	}
	defer c.stop()
	for {
		evs, head, wait, err := st.hub.after(last)
		if errors.Is(err, errBehind) {
			evs, head, err = st.hub.replay(last)
			if err == nil && len(evs) == 0 && last < head {
				err = bolt.ErrChangeUnknown // a hole in the log: never wait on it
			}
		}
		switch {
		case errors.Is(err, bolt.ErrChangeUnknown):
			// The client's position was trimmed away, or was never ours:
			// tell it to reload, and go on from the head.
			last = head
			st.buf = append(st.buf[:0], "id: "...)
			st.buf = strconv.AppendUint(st.buf, head, 10)
			st.buf = append(st.buf, "\nevent: reset\ndata: {\"reason\":\"the change log no longer holds the requested event; reload and continue from here\"}\n\n"...)
			if st.send() != nil {
				return
			}
			continue
		case err != nil:
			return // the store failed; the client reconnects and resumes
		}
		if len(evs) > 0 {
			st.buf = st.buf[:0]
			for _, ev := range evs {
				if st.filter.passes(ev) {
					st.buf = append(st.buf, ev.text...)
				}
			}
			last = evs[len(evs)-1].seq
			if len(st.buf) > 0 {
				if st.send() != nil {
					return
				}
				c.heartbeat.Reset(limits.Heartbeat)
			}
			if newest, _ := st.db.ChangeHead(); newest-last > allowedLag {
				// Too slow to keep up: let it reconnect and resume from the
				// log rather than hold on to it here.
				st.buf = append(st.buf[:0], ": too far behind; reconnect to resume\nretry: "...)
				st.buf = strconv.AppendInt(st.buf, retryMillis, 10)
				st.buf = append(st.buf, "\n\n"...)
				_ = st.send()
				return
			}
			// A stream with events always waiting never blocks below, so
			// revocation, expiry and shutdown are looked at between batches.
			if st.handle(c, c.poll(ctx, st.hub.closing)) {
				return
			}
			continue
		}
		allowedLag = uint64(limits.MaxLag) // caught up: live from here
		if st.handle(c, c.wait(ctx, st.hub.closing, wait)) {
			return
		}
	}
}

// streamControls are what a stream watches besides new commits.
type streamControls struct {
	heartbeat *time.Timer
	expiry    *time.Timer
	check     *time.Ticker
	recheck   <-chan struct{}
}

func (c *streamControls) stop() {
	c.heartbeat.Stop()
	c.expiry.Stop()
	c.check.Stop()
}

// signal is what woke a stream.
type signal int

const (
	noSignal signal = iota
	committed
	heartbeatDue
	tokenDeleted
	tokenCheckDue
	tokenExpired
	shuttingDown
	clientGone
)

// poll reports a pending control signal, or noSignal, without waiting.
func (c *streamControls) poll(ctx context.Context, closing <-chan struct{}) signal {
	select {
	case <-c.recheck:
		return tokenDeleted
	case <-c.check.C:
		return tokenCheckDue
	case <-c.expiry.C:
		return tokenExpired
	case <-closing:
		return shuttingDown
	case <-ctx.Done():
		return clientGone
	default:
		return noSignal
	}
}

// wait blocks until the next commit or control signal.
func (c *streamControls) wait(ctx context.Context, closing, commit <-chan struct{}) signal {
	select {
	case <-commit:
		return committed
	case <-c.heartbeat.C:
		return heartbeatDue
	case <-c.recheck:
		return tokenDeleted
	case <-c.check.C:
		return tokenCheckDue
	case <-c.expiry.C:
		return tokenExpired
	case <-closing:
		return shuttingDown
	case <-ctx.Done():
		return clientGone
	}
}

// handle acts on sig and reports whether the stream must end.
func (st *stream) handle(c *streamControls, sig signal) bool {
	switch sig {
	case heartbeatDue:
		st.buf = append(st.buf[:0], ": keep-alive\n\n"...)
		c.heartbeat.Reset(st.hub.limits.Heartbeat)
		return st.send() != nil
	case tokenDeleted:
		c.recheck = st.db.TokenDeleted(st.userID)
		return !st.tokenWorks()
	case tokenCheckDue:
		return !st.tokenWorks()
	case tokenExpired, clientGone:
		return true
	case shuttingDown:
		// Ask the client to come back a little later, when the server (or
		// its replacement) is up.
		st.buf = append(st.buf[:0], ": server shutting down\nretry: "...)
		st.buf = strconv.AppendInt(st.buf, retryMillis, 10)
		st.buf = append(st.buf, "\n\n"...)
		_ = st.send()
		return true
	}
	return false
}

// send writes and flushes the buffer within the write timeout.
func (st *stream) send() error {
	if err := st.rc.SetWriteDeadline(time.Now().Add(st.hub.limits.WriteTimeout)); err != nil {
		return err
	}
	if _, err := st.w.Write(st.buf); err != nil {
		return err
	}
	return st.rc.Flush()
}

// tokenWorks reports whether the stream's token still authenticates.
func (st *stream) tokenWorks() bool {
	_, _, err := st.db.Authenticate(st.token)
	return err == nil
}

// errShuttingDown refuses streams while the server stops.
var errShuttingDown = &requestError{status: http.StatusServiceUnavailable, msg: "the server is shutting down", header: http.Header{"Retry-After": {retryAfterSeconds(streamRetryAfter)}}}
