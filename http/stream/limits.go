package stream

import "time"

// Limits tune live streams; zero values take the defaults.
type Limits struct {
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
	// on top of the check every revocation of one of its account's tokens
	// in the change log triggers at once and the comparison with the
	// token's expiry on the store's clock, made at every housekeeping
	// tick: a safety net.
	TokenCheck time.Duration
	// StoreTimeout bounds each of the dispatcher's reads of the store. A
	// store that stops answering (a database out of reach whose
	// connection is not yet found dead) would otherwise hold up every
	// stream's heartbeats and ends with it; this way a stream whose
	// events cannot be read is ended, its client resuming elsewhere, and
	// the others still hear from the server.
	StoreTimeout time.Duration
}

// Stream defaults.
const (
	DefaultPerUser      = 16
	DefaultTotal        = 10000
	DefaultHeartbeat    = 25 * time.Second // below the 60 s idle timeout of common proxies
	DefaultWriteTimeout = 10 * time.Second
	DefaultMaxLag       = 1024
	DefaultTokenCheck   = time.Minute
	DefaultStoreTimeout = 5 * time.Second
)

func (l Limits) withDefaults() Limits {
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
	set(&l.PerUser, DefaultPerUser)
	set(&l.Total, DefaultTotal)
	set(&l.MaxLag, DefaultMaxLag)
	l.MaxLag = min(l.MaxLag, hubMemory)
	setDur(&l.Heartbeat, DefaultHeartbeat)
	setDur(&l.WriteTimeout, DefaultWriteTimeout)
	setDur(&l.TokenCheck, DefaultTokenCheck)
	setDur(&l.StoreTimeout, DefaultStoreTimeout)
	return l
}
