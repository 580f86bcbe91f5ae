package pg

import (
	"context"
	"sync"
	"time"

	"herald/model"
)

// LastUsedAt is kept without turning reads into writes: a read that finds
// its token's LastUsedAt older than model.TokenUseGranularity notes the
// use in this instance's memory, and FlushTokenUses writes the notes in
// one statement. Each instance flushes its own notes; a crash loses at
// most the notes since its last flush, which only makes a "last used"
// time read a little old.

// maxPendingUses bounds the notes kept between flushes; beyond it new
// notes are dropped until the next flush (they are advisory).
const maxPendingUses = 100000

type tokenUses struct {
	mu      sync.Mutex
	pending map[model.TokenHash]time.Time
}

// note records that t was used at now, if its stored LastUsedAt is stale.
func (u *tokenUses) note(t *model.Token, now time.Time) {
	if now.Sub(t.LastUsedAt) < model.TokenUseGranularity {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.pending == nil {
		u.pending = make(map[model.TokenHash]time.Time)
	}
	if prev, ok := u.pending[t.Hash]; ok || len(u.pending) < maxPendingUses {
		if now.After(prev) {
			u.pending[t.Hash] = now
		}
	}
}

// lastUse is t's LastUsedAt including a use noted here and not yet written.
func (u *tokenUses) lastUse(t *model.Token) time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	if p, ok := u.pending[t.Hash]; ok && p.After(t.LastUsedAt) {
		return p
	}
	return t.LastUsedAt
}

func (u *tokenUses) take() map[model.TokenHash]time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	p := u.pending
	u.pending = nil
	return p
}

// FlushTokenUses writes the uses this instance noted to their tokens,
// skipping tokens revoked since and never moving a time back (another
// instance may have written a later one). It returns how many tokens it
// updated.
func (db *DB) FlushTokenUses(ctx context.Context) (int, error) {
	pending := db.uses.take()
	if len(pending) == 0 {
		return 0, nil
	}
	hashes := make([][]byte, 0, len(pending))
	ats := make([]time.Time, 0, len(pending))
	for h, at := range pending {
		hashes = append(hashes, h[:])
		ats = append(ats, at)
	}
	// Two instances flushing uses of the same tokens may deadlock, and
	// PostgreSQL then ends one: it tries again.
	var err error
	for attempt := 1; attempt <= maxWriteAttempts; attempt++ {
		// An account is last seen when one of its tokens was last used.
		var n int
		err = db.pool.QueryRow(ctx, `WITH t AS (
				UPDATE tokens t SET last_used_at = u.at
				FROM unnest($1::bytea[], $2::timestamptz[]) AS u(hash, at)
				WHERE t.hash = u.hash AND t.last_used_at < u.at
				RETURNING t.user_id, t.last_used_at
			), s AS (
				UPDATE users SET last_seen_at = greatest(users.last_seen_at, x.at)
				FROM (SELECT user_id, max(last_used_at) AS at FROM t GROUP BY user_id) x
				WHERE users.id = x.user_id
			)
			SELECT count(*) FROM t`, hashes, ats).Scan(&n)
		if err == nil {
			return n, nil
		}
		if !retryable(err) {
			break
		}
	}
	return 0, err
}
