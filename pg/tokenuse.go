package pg

import (
	"context"
	"time"
)

// FlushTokenUses writes the uses this instance noted to their tokens,
// skipping tokens revoked since and never moving a time back (another
// instance may have written a later one). It returns how many tokens it
// updated.
func (db *DB) FlushTokenUses(ctx context.Context) (int, error) {
	pending := db.uses.Take()
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
