package model

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// TokenHash is the SHA-256 of a bearer token. Only the hash is stored, so a
// copy of the database file does not hand out working tokens.
type TokenHash [32]byte

// Token is one issued bearer token; a user may hold several (one per device).
type Token struct {
	Hash TokenHash
	// ID is the token's public handle, shown in the list of a user's tokens
	// and used to revoke one. It is random, not derived from the secret.
	ID         TokenID
	UserID     uint64
	CreatedAt  time.Time
	LastUsedAt time.Time
	ExpiresAt  time.Time
}

// TokenID is a token's public handle.
type TokenID [8]byte

// String is the handle as the API shows it.
func (id TokenID) String() string { return hex.EncodeToString(id[:]) }

// ParseTokenID reads a handle as String writes it.
func ParseTokenID(s string) (TokenID, bool) {
	var id TokenID
	if len(s) != 2*len(id) {
		return id, false
	}
	_, err := hex.Decode(id[:], []byte(s))
	return id, err == nil && s == id.String() // lower case only: one spelling per ID
}

// Token limits.
const (
	// MaxTokensPerUser bounds the devices a user is logged in on; a login
	// beyond it drops the oldest token.
	MaxTokensPerUser = 50
	// TokenUseGranularity is how stale a token's LastUsedAt may get: a use
	// is recorded at most once per this interval, so reads do not turn into
	// writes.
	TokenUseGranularity = time.Minute
)

// NewTokenID draws a random public handle.
func NewTokenID() TokenID {
	var id TokenID
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails on supported platforms
	return id
}

// TokenExpiry is when a token issued at created with lifetime ttl stops
// working, at the precision stores keep, so the time a client is told is
// the time that is enforced.
func TokenExpiry(created time.Time, ttl time.Duration) time.Time {
	return created.Add(ttl).Truncate(time.Microsecond)
}

// TokenUses keeps a token's LastUsedAt without turning reads into writes:
// a read that finds its token's LastUsedAt older than TokenUseGranularity
// notes the use here, and the store writes the notes in one go (its
// FlushTokenUses). A crash loses at most the notes since the last flush,
// which only makes a "last used" time read a little old. The zero value
// is ready; it is safe for concurrent use.
type TokenUses struct {
	mu      sync.Mutex
	pending map[TokenHash]time.Time
}

// maxPendingUses bounds the notes kept between flushes; beyond it new
// notes are dropped until the next flush (they are advisory).
const maxPendingUses = 100000

// Note records that t was used at now, if its stored LastUsedAt is stale.
func (u *TokenUses) Note(t *Token, now time.Time) {
	if now.Sub(t.LastUsedAt) < TokenUseGranularity {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.pending == nil {
		u.pending = make(map[TokenHash]time.Time)
	}
	if prev, ok := u.pending[t.Hash]; ok || len(u.pending) < maxPendingUses {
		if now.After(prev) {
			u.pending[t.Hash] = now
		}
	}
}

// LastUse is t's LastUsedAt including a use noted and not yet written.
func (u *TokenUses) LastUse(t *Token) time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	if p, ok := u.pending[t.Hash]; ok && p.After(t.LastUsedAt) {
		return p
	}
	return t.LastUsedAt
}

// Take returns the notes and forgets them, for the store to write.
func (u *TokenUses) Take() map[TokenHash]time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	p := u.pending
	u.pending = nil
	return p
}
