package stream

import (
	"net/http"
	"strconv"
	"time"

	"herald/http/netquirk"
	"herald/model"
)

// retryMillis is the reconnection delay every stream suggests to its
// client in a retry: field.
const retryMillis = 3000

// Request is a stream the route's handler has parsed and authenticated.
type Request struct {
	Filter Filter
	// From is the position to resume after (Last-Event-ID); nil starts
	// from the newest change.
	From  *uint64
	User  *model.User  // the caller
	Token *model.Token // the token it presented, which the stream rechecks
}

// Texts a stream sends besides events.
const (
	connectedText = ": connected\n\n"
	// heartbeatHeader carries the keep-alive interval, in milliseconds.
	heartbeatHeader = "Herald-Stream-Heartbeat"
	keepAliveText   = ": keep-alive\n\n"
	behindText      = ": too far behind; reconnect to resume\n"
	shutdownText    = ": server shutting down\n"
	busyText        = ": server busy; reconnect to resume\n"
	resetText       = "\nevent: reset\ndata: {\"reason\":\"the change log no longer holds the requested event; reload and continue from here\"}\n\n"
)

// Serve admits req's stream within the limits, sends its status, takes the
// connection from net/http and serves the stream on it until it ends.
// Errors, all before the status: model.ErrLimited beyond a limit,
// model.ErrUnavailable while the server shuts down.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, req Request) error {
	release, acct, err := h.admit(req.User.ID)
	if err != nil {
		return err
	}
	// The stream starts from the head as it is before the status goes
	// out: a client that sees the 200 and then writes must get its own
	// change, so the position cannot be read any later than this.
	head, _, err := h.feed.ChangeHead(r.Context())
	if err != nil {
		release()
		return err
	}

	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("X-Accel-Buffering", "no") // nginx would otherwise hold events back
	// The longest the stream stays silent, so a client can tell a quiet
	// stream from a connection that died without a word (a laptop lid, a
	// NAT that forgot it) and reconnect.
	hd.Set(heartbeatHeader, strconv.FormatInt(h.limits.Heartbeat.Milliseconds(), 10))
	// The body ends when the connection does, as the SSE specification
	// recommends: once the connection is the stream's own, what it writes
	// is the body, with no chunk framing.
	netquirk.UnframedBody(hd)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		release()
		return nil
	}
	conn, err := netquirk.TakeOver(w)
	if err != nil {
		release()
		return nil // the status has gone out; the client sees an empty stream and retries
	}
	if h.afterStatus != nil {
		h.afterStatus()
	}
	sub := &subscriber{conn: conn, filter: req.Filter.compile(req.User.ID), userID: req.User.ID, account: acct, token: req.Token.Hash, expires: req.Token.ExpiresAt, release: release,
		remote: r.RemoteAddr, started: time.Now()}
	h.start(r.Context(), sub, req.From, head)
	return nil
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
