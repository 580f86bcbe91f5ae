// Package connlimit bounds the connections one client address holds open
// at once.
//
// net/http serves any number of connections from one address. One that
// never completes its request headers is closed after the server's
// ReadHeaderTimeout, but one that has made a request is kept for the next
// for IdleTimeout, and each costs a file descriptor and kilobytes of
// memory: one address that makes a request on each of thousands of
// connections, and another before IdleTimeout runs out, holds them all for
// as long as it likes. Limit closes a connection beyond the limit as soon
// as it is accepted.
//
// A connection holds its place until it closes or a handler takes it over
// from net/http (a live stream), which the streams' own caps then bound. A
// connection is counted by http.Server.ConnState rather than by wrapping
// it: a *net.TCPConn must stay one, for net.Buffers to go out in one
// writev(2).
package connlimit

import (
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"herald/auth"
)

// DefaultPerAddress is the limit a server takes by default: a browser
// opens at most six connections to a server, so this is some eighty
// browsers behind one address (an office's or a school's router, or a
// carrier's), and an address that holds all of it holds about 8 MiB.
const DefaultPerAddress = 512

// Options configures Limit.
type Options struct {
	// PerAddress is the most connections one client address holds open at
	// once; IPv6 addresses count by /64, as the guessing limits do. Zero
	// means no limit.
	PerAddress int
	// Exempt are peers whose connections are not counted: reverse proxies,
	// whose connections carry the requests of many clients.
	Exempt []netip.Prefix
	// Logger is told of refused connections, one line a minute at most;
	// nil discards.
	Logger *slog.Logger
	// OnRefuse, when set, is called for each connection refused.
	OnRefuse func()
}

// logEvery is the shortest time between two log lines about refusals, so
// a flood of connections is not also a flood of the log.
const logEvery = time.Minute

// Limit returns ln with the connections of an address beyond
// o.PerAddress closed as soon as they are accepted, and sets srv.ConnState
// so that a connection's place is freed when it closes or a handler takes
// it over. Serve srv on the listener it returns.
func Limit(srv *http.Server, ln net.Listener, o Options) net.Listener {
	if o.PerAddress <= 0 {
		return ln
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	l := &listener{Listener: ln, o: o, open: make(map[string]int), places: make(map[string]string)}
	before := srv.ConnState
	srv.ConnState = func(c net.Conn, state http.ConnState) {
		if before != nil {
			before(c, state)
		}
		if state == http.StateClosed || state == http.StateHijacked {
			l.free(c)
		}
	}
	return l
}

type listener struct {
	net.Listener
	o Options

	mu sync.Mutex
	// open counts the connections of each client address (auth.AddressKey).
	open map[string]int
	// places maps each counted connection, by its peer's address and port,
	// to the key it is counted under. net/http reports a connection's end
	// with the connection it was handed, which a later listener may have
	// wrapped: the peer's address and port are what both share.
	places map[string]string
	// refused counts refusals since the last log line, at lastLog.
	refused int
	lastLog time.Time
}

// Accept returns the next connection whose address is under its limit,
// closing those that are not.
func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.admit(c) {
			return c, nil
		}
		_ = c.Close()
	}
}

// admit counts c against its address's limit, or reports that the address
// is at it.
func (l *listener) admit(c net.Conn) bool {
	peer, ok := peerAddr(c)
	if !ok || l.exempt(peer) {
		return true
	}
	key := auth.AddressKey(peer)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key] >= l.o.PerAddress {
		l.noteRefusalLocked(key)
		return false
	}
	l.open[key]++
	l.places[c.RemoteAddr().String()] = key
	return true
}

// free gives back the place of a connection that closed or was taken
// over; a connection that holds none (exempt) is left alone.
func (l *listener) free(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	place := c.RemoteAddr().String()
	key, ok := l.places[place]
	if !ok {
		return
	}
	delete(l.places, place)
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
}

func (l *listener) noteRefusalLocked(key string) {
	if l.o.OnRefuse != nil {
		l.o.OnRefuse()
	}
	l.refused++
	now := time.Now()
	if now.Sub(l.lastLog) < logEvery {
		return
	}
	// refused counts this one and those not logged since the last line.
	l.o.Logger.Warn("connection refused: too many open from one address",
		"addr", key, "limit", l.o.PerAddress, "refused", l.refused)
	l.refused, l.lastLog = 0, now
}

func (l *listener) exempt(a netip.Addr) bool {
	for _, p := range l.o.Exempt {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peerAddr is the IP address of c's peer; false for a connection that has
// none (a Unix socket's), which is not counted.
func peerAddr(c net.Conn) (netip.Addr, bool) {
	tcp, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	return tcp.AddrPort().Addr().Unmap(), true
}
