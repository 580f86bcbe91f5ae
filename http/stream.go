package http

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"

	"herald/bolt"
	"herald/model"
)

// The live stream: GET /api/messages/stream, Server-Sent Events of the
// store's change log (see bolt/changes.go) through the filters of search.
//
// Fan-out without a copy, or a waiting goroutine, per subscriber: the hub
// renders each change once into the bytes of its event and keeps the
// newest hubMemory of them in one shared, append-only window. A stream's
// request catches it up (from the log on disk when it resumes from long
// ago), then takes the connection from net/http and hands it to the hub.
// One dispatcher goroutine then serves every stream in rounds: after a
// commit it gives each stream the events its filter passes, all of them in
// one write, on a goroutine that lives for that write only. Commits closer
// together than the gap between rounds share a round, so a busy log costs
// a write per stream per round rather than per change; the gap widens
// when writes take long (streamRoundGap). Nobody waits for anybody: a
// client that stops reading only falls behind, and is cut off once it is
// MaxLag changes behind or one write has taken WriteTimeout.

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
	// triggers at once (bolt.DB.WatchTokenDeletions) and the comparison
	// with the token's expiry on the store's clock (Config.Now), made at
	// every housekeeping tick: a safety net.
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

// streamBatch bounds the changes a stream catching up takes at once, so
// it writes in pieces and checks its lag between them.
const streamBatch = 256

// The time between two of the dispatcher's rounds is at least
// streamRoundGap, and streamGapPerWrite for each write the last round
// made, up to streamRoundGapMax, which bounds an event's added delay. A
// write costs its syscall (on loopback, the receiver's side of TCP too)
// whatever it carries, about 5 µs here: so with many streams, fewer and
// fuller writes keep the fan-out to about a fifth of one core, leaving the
// rest to the writers. Above streamBusyRate changes a second the gap
// widens in proportion to the rate, since the bytes every stream must be
// sent grow with it: what the writes cost per call has to shrink to leave
// the writers their share. Measuring the writes' time instead would count
// the waits for a CPU of a busy machine as cost, and slow the streams
// exactly when delay hurts most.
const (
	streamRoundGap    = 10 * time.Millisecond
	streamGapPerWrite = 25 * time.Microsecond
	streamBusyRate    = 400
	streamRoundGapMax = 250 * time.Millisecond
)

// roundGap is the least time from the start of a round that made writes
// writes to the start of the next, with changes committing at rate a
// second.
func roundGap(writes int, rate float64) time.Duration {
	gap := time.Duration(float64(writes) * float64(streamGapPerWrite) * max(1, rate/streamBusyRate))
	return min(max(streamRoundGap, gap), streamRoundGapMax)
}

// keptPieces is the most pieces whose storage a stream keeps between
// rounds; runs rendered together make one piece, so this is most writes.
const keptPieces = 8

// streamFinalWrite bounds the write of a stream's last words (a retry
// hint), and so how long a shutdown waits for them.
const streamFinalWrite = time.Second

// streamReadLimit is how much a client may send after its request before
// its stream is cut: SSE clients send nothing.
const streamReadLimit = 4 << 10

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
	owner  string              // model.EmailKey of the message's owner
	terms  map[string]struct{} // the message's words after the change
	before map[string]struct{} // and before it, for an update
	text   []byte              // id:, event: and data: lines, blank line included
	// block holds text and, back to back, the texts of the events
	// rendered with it, so a stream sent a run of them gets one piece
	// (see appendPiece) rather than a piece per event.
	block []byte
	off   int // where text starts in block
	size  int // memory it holds, roughly
}

// renderEvents renders changes, consecutive in the log, into events whose
// texts share blocks of about eventBlockBytes.
func renderEvents(chs []*model.Change) []*event {
	evs := make([]*event, 0, len(chs))
	for len(chs) > 0 {
		n, room := 0, 0
		for ; n < len(chs); n++ {
			r := eventRoom(chs[n])
			if n > 0 && room+r > eventBlockBytes {
				break
			}
			room += r
		}
		evs = renderBlock(evs, chs[:n], room)
		chs = chs[n:]
	}
	return evs
}

// eventBlockBytes bounds a block of rendered events: one event left in
// the hub's window keeps its whole block, so the window's byte limit is
// exceeded by at most about this much.
const eventBlockBytes = 64 << 10

// eventRoom is about the bytes ch's event renders to.
func eventRoom(ch *model.Change) int {
	return 160 + len(ch.Message.Content) + len(ch.Message.OwnerEmail)
}

// renderBlock appends to evs the events of chs, their texts back to back
// in one block of capacity room (more if they need it).
func renderBlock(evs []*event, chs []*model.Change, room int) []*event {
	first := len(evs)
	block := make([]byte, 0, room)
	for _, ch := range chs {
		ev := &event{seq: ch.Seq, owner: model.EmailKey(ch.Message.OwnerEmail), terms: model.ContentTerms(ch.Message.Content), off: len(block)}
		if ch.Kind == model.MessageUpdated {
			ev.before = model.ContentTerms(ch.Before)
		}
		block = appendEventText(block, ch)
		evs = append(evs, ev)
	}
	// Offsets hold in the final block wherever append moved it.
	for i, ev := range evs[first:] {
		end := len(block)
		if first+i+1 < len(evs) {
			end = evs[first+i+1].off
		}
		ev.block = block
		ev.text = block[ev.off:end:end]
		// The term sets cost about what the text they came from does.
		ev.size = 2*len(ev.text) + len(chs[i].Before)
	}
	return evs
}

// appendEventText appends the lines of ch's event.
func appendEventText(b []byte, ch *model.Change) []byte {
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, ch.Seq, 10)
	b = append(b, "\nevent: "...)
	b = append(b, ch.Kind.String()...)
	b = append(b, "\ndata: "...)
	if ch.Kind == model.MessageDeleted {
		b = append(b, `{"id":`...)
		b = strconv.AppendUint(b, ch.Message.ID, 10)
		b = append(b, '}')
	} else {
		// JSON escapes every line break, so the payload is one data: line.
		b = appendMessageJSON(b, &ch.Message)
	}
	return append(b, "\n\n"...)
}

// appendPiece adds ev's text to the pieces of a write, lengthening the
// last piece instead when the text follows it in the same block. A piece
// keeps its block's capacity so the next text can be found after it; the
// pieces are only written, never appended to.
func appendPiece(pieces net.Buffers, ev *event) net.Buffers {
	if n := len(pieces); n > 0 {
		last := pieces[n-1]
		if after := last[len(last):cap(last)]; len(after) >= len(ev.text) && &after[0] == &ev.text[0] {
			pieces[n-1] = last[:len(last)+len(ev.text)]
			return pieces
		}
	}
	return append(pieces, ev.block[ev.off:ev.off+len(ev.text)])
}

// streamFilter is what a stream asked for: search's q and owner.
type streamFilter struct {
	terms []string
	owner string // model.EmailKey; "" for everyone
}

// passes reports whether a stream with this filter sends ev. An update
// passes when the message matched before it or matches after it, so a
// client showing a filtered list learns of a message that left it. An
// event whose owner is unknown passes any owner: only the deletions of an
// account purge that a release before the change log began lack one, and
// a deletion of a message the client never showed costs it nothing, while
// a missed one leaves a deleted message on its screen.
func (f *streamFilter) passes(ev *event) bool {
	if f.owner != "" && ev.owner != "" && ev.owner != f.owner {
		return false
	}
	return hasAll(ev.terms, f.terms) || (ev.before != nil && hasAll(ev.before, f.terms))
}

// gather appends to out the texts of the events of evs that pass, in as
// few pieces as they lie in (appendPiece).
func (f *streamFilter) gather(out net.Buffers, evs []*event) net.Buffers {
	for _, ev := range evs {
		if f.passes(ev) {
			out = appendPiece(out, ev)
		}
	}
	return out
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

// streamHub renders changes once, admits streams within their limits, and
// sends every registered stream what it has not had yet.
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

	mu        sync.Mutex
	perUser   map[uint64]int // open streams of each account that has any
	total     int
	closing   chan struct{} // closed when the server shuts down
	closed    bool
	streams   sync.WaitGroup // every admitted stream, until it releases its place
	live      []*subscriber  // streams caught up and served by the dispatcher
	running   bool           // the dispatcher runs; it does while live is not empty
	stopWatch func()         // ends the dispatcher's watch on token deletions

	revokedMu sync.Mutex
	revoked   map[uint64]bool // accounts that lost a token since the last round

	poke chan struct{} // wakes the dispatcher; holds at most one wake

	// afterStatus, when set (by tests), runs once a stream's status has
	// gone out and before the stream starts.
	afterStatus func()
}

func newStreamHub(db *bolt.DB, limits StreamLimits, now func() time.Time) *streamHub {
	h := &streamHub{
		db: db, limits: limits.withDefaults(), now: now,
		perUser: make(map[uint64]int), closing: make(chan struct{}), poke: make(chan struct{}, 1),
	}
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

// close ends every stream, each with a retry hint, and refuses new ones.
// It waits, a few seconds at most, for the hints to go out.
func (h *streamHub) close() {
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
func (h *streamHub) wake() {
	select {
	case h.poke <- struct{}{}:
	default:
	}
}

// tokenDeleted notes, for the next round, that userID lost a token. It
// runs on the store's committing goroutine, so it only notes.
func (h *streamHub) tokenDeleted(userID uint64) {
	h.revokedMu.Lock()
	if h.revoked == nil {
		h.revoked = make(map[uint64]bool)
	}
	h.revoked[userID] = true
	h.revokedMu.Unlock()
	h.wake()
}

func (h *streamHub) takeRevoked() map[uint64]bool {
	h.revokedMu.Lock()
	defer h.revokedMu.Unlock()
	r := h.revoked
	h.revoked = nil
	return r
}

// windowUpTo renders the window up to head and returns it. The window only
// ever appends past its end or drops from its front, so the slice stays
// valid after the lock is released.
func (h *streamHub) windowUpTo(head uint64) ([]*event, error) {
	h.windowMu.Lock()
	defer h.windowMu.Unlock()
	if err := h.renderUpTo(head); err != nil {
		return nil, err
	}
	return h.window, nil
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

// renderUpTo brings the window up to head; h.windowMu is held.
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
		if errors.Is(err, model.ErrChangeUnknown) {
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
		for _, ev := range renderEvents(chs) {
			h.window = append(h.window, ev)
			h.windowBytes += ev.size
		}
		h.rendered = chs[len(chs)-1].Seq
	}
	// Drop from the front by reslicing: rounds and catch-ups hold slices
	// of the window outside the lock, and append only writes past their end.
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
	return renderEvents(chs), head, nil
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
	owner, err := parseOwner(params)
	if err != nil {
		return err
	}
	if owner != "" {
		filter.owner = model.EmailKey(owner)
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

	// The stream starts from the head as it is before the status goes
	// out: a client that sees the 200 and then writes must get its own
	// change, so the position cannot be read any later than this.
	head, _ := s.db.ChangeHead()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no") // nginx would otherwise hold events back
	// The longest the stream stays silent, so a client can tell a quiet
	// stream from a connection that died without a word (a laptop lid, a
	// NAT that forgot it) and reconnect.
	h.Set(heartbeatHeader, strconv.FormatInt(s.streams.limits.Heartbeat.Milliseconds(), 10))
	// The body ends when the connection does, as the SSE specification
	// recommends: once the connection is the stream's own, what it writes
	// is the body, with no chunk framing.
	h.Set("Transfer-Encoding", "identity")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		release()
		return nil
	}
	// Take the connection from net/http: a stream then holds no server
	// buffers and no goroutine of net/http's, and the dispatcher writes to
	// it directly.
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		release()
		return nil // the status has gone out; the client sees an empty stream and retries
	}
	conn = rawConn(conn)
	if s.streams.afterStatus != nil {
		s.streams.afterStatus()
	}
	sub := &subscriber{conn: conn, filter: filter, userID: u.ID, token: caller(r).tokenHash, expires: tok.ExpiresAt, release: release}
	s.streams.start(sub, from, head)
	return nil
}

// subscriber is one live stream on its hijacked connection.
//
// Until it is caught up, the request's goroutine writes to it (start).
// From then on the dispatcher owns last and lastSend, and hands each write
// to a goroutine of its own, so a client that does not read holds up
// nobody; a small goroutine per stream waits for the client to leave.
type subscriber struct {
	conn    net.Conn
	filter  streamFilter
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

// Texts a stream sends besides events.
const (
	connectedText = ": connected\n\n"
	// heartbeatHeader carries the keep-alive interval, in milliseconds.
	heartbeatHeader = "Herald-Stream-Heartbeat"
	keepAliveText   = ": keep-alive\n\n"
	behindText      = ": too far behind; reconnect to resume\n"
	shutdownText    = ": server shutting down\n"
	resetText       = "\nevent: reset\ndata: {\"reason\":\"the change log no longer holds the requested event; reload and continue from here\"}\n\n"
)

// start catches sub up from the position it resumes from (or from head,
// the log's head when its status went out), then hands it to the
// dispatcher, all on the request's goroutine. The stream is cut if it
// falls further behind while catching up.
func (h *streamHub) start(sub *subscriber, from *uint64, head uint64) {
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
	for {
		select {
		case <-h.closing:
			h.finish(sub, append(buf, hint(shutdownText)...))
			return
		default:
		}
		head, _ := h.db.ChangeHead()
		var evs []*event
		window, err := h.windowUpTo(head)
		switch {
		case last > head:
			err = model.ErrChangeUnknown
		case err == nil:
			evs, err = eventsAfter(window, last, head)
			evs = evs[:min(len(evs), streamBatch)]
		}
		if errors.Is(err, errBehind) {
			evs, head, err = h.replay(last)
			if err == nil && len(evs) == 0 && last < head {
				err = model.ErrChangeUnknown // a hole in the log: never wait on it
			}
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
			h.finish(sub, nil) // the store failed; the client reconnects and resumes
			return
		}
		for _, ev := range evs {
			if sub.filter.passes(ev) {
				buf = append(buf, ev.text...)
			}
		}
		if len(buf) > 0 {
			_ = sub.conn.SetWriteDeadline(time.Now().Add(h.limits.WriteTimeout))
			if _, err := sub.conn.Write(buf); err != nil {
				h.finish(sub, nil)
				return
			}
			buf = buf[:0]
		}
		if len(evs) == 0 {
			break
		}
		last = evs[len(evs)-1].seq
		if newest, _ := h.db.ChangeHead(); newest-last > allowedLag {
			h.finish(sub, append(buf, hint(behindText)...))
			return
		}
	}
	// From here the dispatcher's watchdog bounds writes, not deadlines.
	_ = sub.conn.SetWriteDeadline(time.Time{})
	sub.last, sub.lastSend = last, time.Now()
	if !h.register(sub) {
		h.finish(sub, hint(shutdownText))
		return
	}
	// A token deleted before the dispatcher was watching would otherwise
	// go unnoticed until the periodic check.
	if !h.tokenWorks(sub) {
		_ = sub.conn.Close()
	}
	go h.watch(sub)
}

// finish writes a last text, when there is one, and ends a stream the
// dispatcher never had.
func (h *streamHub) finish(sub *subscriber, text []byte) {
	if len(text) > 0 {
		_ = sub.conn.SetWriteDeadline(time.Now().Add(streamFinalWrite))
		_, _ = sub.conn.Write(text)
	}
	_ = sub.conn.Close()
	sub.release()
}

// register hands a caught-up stream to the dispatcher, starting it (and
// its watch on token deletions) for the first stream; false once the hub
// is closing.
func (h *streamHub) register(sub *subscriber) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.live = append(h.live, sub)
	if !h.running {
		h.running = true
		h.stopWatch = h.db.WatchTokenDeletions(h.tokenDeleted)
		go h.dispatch()
	}
	h.wake()
	return true
}

// watch waits for the client to go away (or for anyone to close the
// connection), then takes the stream out of the hub. Clients send nothing
// after their request; a client that sends more than a little is cut off.
func (h *streamHub) watch(sub *subscriber) {
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

// dispatch sends the live streams what each has not had, a round at a
// time: after each commit, but no sooner than the gap after the round
// before (see streamRoundGap), so commits close together reach each stream
// in one write.
// It also does the streams' housekeeping on a ticker, and returns when no
// stream is left.
func (h *streamHub) dispatch() {
	tick := time.NewTicker(h.housekeepingPeriod())
	defer tick.Stop()
	closing := h.closing
	var subs []*subscriber
	var lastTokenCheck, prevStart time.Time
	var prevHead uint64
	for {
		start := time.Now()
		head, commit := h.db.ChangeHead()
		h.mu.Lock()
		if len(h.live) == 0 {
			h.running = false
			h.stopWatch()
			h.mu.Unlock()
			return
		}
		subs = append(subs[:0], h.live...)
		h.mu.Unlock()
		writes := h.round(subs, head, start)
		clear(subs) // hold no stream past its end

		select {
		case <-commit:
		case <-h.poke:
		case now := <-tick.C:
			checkTokens := now.Sub(lastTokenCheck) >= h.limits.TokenCheck
			if checkTokens {
				lastTokenCheck = now
			}
			h.mu.Lock()
			subs = append(subs[:0], h.live...)
			h.mu.Unlock()
			h.housekeep(subs, now, checkTokens)
			clear(subs)
		case <-closing:
			closing = nil // once is enough; the streams now end as their writes do
			h.mu.Lock()
			subs = append(subs[:0], h.live...)
			h.mu.Unlock()
			for _, sub := range subs {
				h.end(sub, hint(shutdownText))
			}
			clear(subs)
		}
		var rate float64
		if !prevStart.IsZero() {
			rate = float64(head-prevHead) / start.Sub(prevStart).Seconds()
		}
		prevHead, prevStart = head, start
		gap := roundGap(writes, rate)
		if wait := gap - time.Since(start); wait > 0 {
			time.Sleep(wait)
		}
	}
}

// round sends each stream the events up to head that its filter passes,
// in one write, and ends the streams that lost their token or fell too far
// behind. It returns how many writes it started.
func (h *streamHub) round(subs []*subscriber, head uint64, now time.Time) (writes int) {
	revoked := h.takeRevoked()
	window, windowErr := h.windowUpTo(head)
	for _, sub := range subs {
		if sub.ended.Load() {
			continue
		}
		if revoked[sub.userID] && !h.tokenWorks(sub) {
			h.end(sub, nil)
			continue
		}
		if sub.last >= head {
			continue
		}
		if sub.writing.Load() {
			// Still writing what it was handed before: it falls behind, and
			// is cut once too far behind to be worth waiting for.
			if head-sub.last > uint64(h.limits.MaxLag) {
				h.end(sub, nil)
			}
			continue
		}
		evs, err := eventsAfter(window, sub.last, head)
		if windowErr != nil || err != nil {
			// Behind the window, or the store failed: the client resumes
			// from the log when it reconnects.
			h.end(sub, hint(behindText))
			continue
		}
		// The stream is not writing, so its pieces are free to reuse.
		out := sub.filter.gather(sub.pieces[:0], evs)
		// Keep the storage of a few pieces for the next round, not of the
		// many a filter passing every other event of a busy round needs:
		// thousands of streams would hold it between rounds.
		sub.pieces = nil
		if cap(out) <= keptPieces {
			sub.pieces = out
		}
		sub.last = head
		if len(out) > 0 {
			h.send(sub, out, now)
			writes++
		}
	}
	return writes
}

// housekeep ends streams whose token expired or stopped working, or whose
// write has taken too long, and sends a heartbeat to those silent too long.
func (h *streamHub) housekeep(subs []*subscriber, now time.Time, checkTokens bool) {
	storeNow := h.now()
	for _, sub := range subs {
		switch {
		case sub.ended.Load():
		case !storeNow.Before(sub.expires), checkTokens && !h.tokenWorks(sub):
			h.end(sub, nil)
		case sub.writing.Load():
			if now.Sub(sub.lastSend) > h.limits.WriteTimeout {
				h.end(sub, nil) // a client that stopped reading
			}
		case now.Sub(sub.lastSend) >= h.limits.Heartbeat:
			h.send(sub, net.Buffers{[]byte(keepAliveText)}, now)
		}
	}
}

// housekeepingPeriod is how often housekeep runs: often enough for the
// shortest of the intervals it enforces, and at most once a second.
func (h *streamHub) housekeepingPeriod() time.Duration {
	l := h.limits
	return min(max(min(l.Heartbeat, l.WriteTimeout, l.TokenCheck)/4, 10*time.Millisecond), time.Second)
}

// send hands out to a goroutine that writes it to sub; the dispatcher
// never waits on a client.
func (h *streamHub) send(sub *subscriber, out net.Buffers, now time.Time) {
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
func (h *streamHub) end(sub *subscriber, text []byte) {
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
func (h *streamHub) tokenWorks(sub *subscriber) bool {
	_, _, err := h.db.Authenticate(sub.token)
	return err == nil
}

// appendRetry appends the line with the reconnection delay every stream
// suggests.
func appendRetry(b []byte) []byte {
	b = append(b, "retry: "...)
	b = strconv.AppendInt(b, retryMillis, 10)
	return append(b, '\n')
}

// hint is a stream's last block: a comment saying why it ends, and the
// reconnection delay.
func hint(comment string) []byte {
	return append(appendRetry([]byte(comment)), '\n')
}

// errShuttingDown refuses streams while the server stops.
var errShuttingDown = &requestError{status: http.StatusServiceUnavailable, msg: "the server is shutting down", header: http.Header{"Retry-After": {retryAfterSeconds(streamRetryAfter)}}}
