package model

import (
	"crypto/rand"
	"encoding/hex"
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
