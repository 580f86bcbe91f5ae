package pg

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// authSQL finds a token and its account. A write adds a lock on the
// token's row (see writeTx.caller).
const authSQL = `SELECT t.user_id, t.handle, t.created_at, t.expires_at, t.last_used_at,
	u.email, u.password_hash, u.roles, u.created_at, u.suspended, u.last_seen_at, u.handle, u.name
FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = $1`

// authLockSQL locks the token until the transaction ends: a revocation
// waits for the writes in flight with it, and writes that come after the
// revocation's wait find the token gone. An update lock, not a share
// lock: PostgreSQL lets a new share lock join those held without waiting
// behind a deletion that waits, so a steady stream of writes with one
// token could hold its logout back for ever; update locks queue in turn.
// Writes with one token (one device) thus take turns; other tokens'
// writes do not wait for them.
const authLockSQL = authSQL + ` FOR NO KEY UPDATE OF t`

// scanAuth reads a row of authSQL and applies the token's rules at now: a
// token unknown, revoked or expired does not work. A working token's use
// is noted for LastUsedAt.
func (db *DB) scanAuth(row pgx.Row, hash model.TokenHash) (*model.User, *model.Token, error) {
	var (
		u                           model.User
		tok                         = &model.Token{Hash: hash}
		userID                      int64
		handle                      []byte
		created, expires, used, uAt time.Time
		seen                        *time.Time
	)
	err := row.Scan(&userID, &handle, &created, &expires, &used, &u.Email, &u.PasswordHash, &u.Roles, &uAt, &u.Suspended, &seen, &u.Handle, &u.Name)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, model.TokenUnknown()
	}
	if err != nil {
		return nil, nil, err
	}
	u.ID, u.CreatedAt = uint64(userID), uAt.UTC()
	if seen != nil {
		u.LastSeenAt = seen.UTC()
	}
	tok.UserID = u.ID
	copy(tok.ID[:], handle)
	tok.CreatedAt, tok.ExpiresAt, tok.LastUsedAt = created.UTC(), expires.UTC(), used.UTC()
	now := db.clock()
	if !now.Before(tok.ExpiresAt) {
		return nil, nil, model.TokenExpired()
	}
	if u.Suspended {
		// A suspension deletes the account's tokens; this is a second line.
		return nil, nil, model.TokenAccountSuspended()
	}
	db.uses.Note(tok, now)
	return &u, tok, nil
}

// authenticate is Authenticate through q, a transaction's or the pool's;
// lock keeps the token from being deleted until q's transaction ends.
func (db *DB) authenticate(ctx context.Context, q querier, hash model.TokenHash, lock bool) (*model.User, *model.Token, error) {
	sql := authSQL
	if lock {
		sql = authLockSQL
	}
	return db.scanAuth(q.QueryRow(ctx, sql, hash[:]), hash)
}

// Authenticate finds the user a token belongs to. Errors:
// model.ErrUnauthorized when the token is unknown, revoked or expired.
func (db *DB) Authenticate(ctx context.Context, hash model.TokenHash) (_ *model.User, _ *model.Token, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	return db.authenticate(ctx, db.pool, hash, false)
}

// issueToken writes a new token for userID, dropping the user's oldest
// tokens beyond model.MaxTokensPerUser. The caller has locked the user's
// row (or created it), so two logins of one account cannot both see room
// for one more.
func (w *writeTx) issueToken(ctx context.Context, hash model.TokenHash, userID uint64, now time.Time, ttl time.Duration) (*model.Token, error) {
	rows, err := w.Query(ctx, `SELECT hash FROM tokens WHERE user_id = $1 ORDER BY created_at, hash`, int64(userID))
	if err != nil {
		return nil, err
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, err
	}
	if over := len(held) - (model.MaxTokensPerUser - 1); over > 0 {
		if _, err := w.Exec(ctx, `DELETE FROM tokens WHERE hash = ANY($1)`, held[:over]); err != nil {
			return nil, err
		}
		w.recordRevocation(userID)
	}
	t := &model.Token{Hash: hash, ID: model.NewTokenID(), UserID: userID, CreatedAt: now, LastUsedAt: now, ExpiresAt: model.TokenExpiry(now, ttl)}
	_, err = w.Exec(ctx, `INSERT INTO tokens (hash, handle, user_id, created_at, expires_at, last_used_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		hash[:], t.ID[:], int64(userID), t.CreatedAt, t.ExpiresAt, t.LastUsedAt)
	if uniqueViolation(err, "tokens_hash_unique") {
		return nil, model.TokenAlreadyIssued()
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// IssueLoginToken issues a token for a login whose password was checked
// against checkedHash. The check took the time of a hash, and the password
// may have changed, or the account gone, meanwhile; so the transaction
// first makes sure checkedHash is still the account's, and a login that
// raced a password change or a deletion gets nothing. It notes the login
// as the account's last sight. Errors: model.ErrUnauthorized,
// model.ErrForbidden for a suspended account.
func (db *DB) IssueLoginToken(ctx context.Context, userID uint64, checkedHash string, hash model.TokenHash, ttl time.Duration) (_ *model.Token, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	var tok *model.Token
	err = db.write(ctx, func(w *writeTx) error {
		var (
			stored    string
			suspended bool
		)
		err := w.QueryRow(ctx, `SELECT password_hash, suspended FROM users WHERE id = $1 FOR NO KEY UPDATE`, int64(userID)).Scan(&stored, &suspended)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && stored != checkedHash) {
			return model.BadCredentials()
		}
		if err != nil {
			return err
		}
		if suspended {
			return model.AccountSuspended()
		}
		now := db.clock()
		if _, err := w.Exec(ctx, `UPDATE users SET last_seen_at = greatest(last_seen_at, $2) WHERE id = $1`, int64(userID), now); err != nil {
			return err
		}
		tok, err = w.issueToken(ctx, hash, userID, now, ttl)
		return err
	})
	if err != nil {
		return nil, err
	}
	return tok, nil
}

// RevokeToken deletes a token so it stops working at once. Errors:
// model.ErrNotFound when no such token exists.
func (db *DB) RevokeToken(ctx context.Context, hash model.TokenHash) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	return db.write(ctx, func(w *writeTx) error {
		var userID int64
		err := w.QueryRow(ctx, `DELETE FROM tokens WHERE hash = $1 RETURNING user_id`, hash[:]).Scan(&userID)
		if errors.Is(err, pgx.ErrNoRows) {
			return model.TokenNotFound()
		}
		if err != nil {
			return err
		}
		w.recordRevocation(uint64(userID))
		return nil
	})
}

// RevokeTokenByID revokes the caller's token with public handle id, which
// may be the one making the request. Errors: model.ErrUnauthorized,
// model.ErrNotFound when the caller holds no token with that handle
// (another user's included).
func (db *DB) RevokeTokenByID(ctx context.Context, by model.Caller, id model.TokenID) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	return db.write(ctx, func(w *writeTx) error {
		u, err := w.caller(ctx, by)
		if err != nil {
			return err
		}
		tag, err := w.Exec(ctx, `DELETE FROM tokens WHERE user_id = $1 AND handle = $2`, int64(u.ID), id[:])
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return model.TokenNotHeld(id.String())
		}
		w.recordRevocation(u.ID)
		return nil
	})
}

// RevokeAllTokens logs the caller out everywhere: every token of theirs
// stops working, the one making the request included. Errors:
// model.ErrUnauthorized, model.ErrNotFound.
func (db *DB) RevokeAllTokens(ctx context.Context, by model.Caller) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	return db.write(ctx, func(w *writeTx) error {
		u, err := w.caller(ctx, by)
		if err != nil {
			return err
		}
		return w.revokeTokensExcept(ctx, u.ID, model.TokenHash{})
	})
}

// revokeTokensExcept deletes every token of userID but keep; the zero
// hash, which no token has, keeps none. It logs a revocation when it
// deleted any.
func (w *writeTx) revokeTokensExcept(ctx context.Context, userID uint64, keep model.TokenHash) error {
	tag, err := w.Exec(ctx, `DELETE FROM tokens WHERE user_id = $1 AND hash <> $2`, int64(userID), keep[:])
	if err != nil {
		return err
	}
	if tag.RowsAffected() > 0 {
		w.recordRevocation(userID)
	}
	return nil
}

// Tokens lists the tokens a user holds that still work, newest first,
// with uses this instance has noted but not yet written.
func (db *DB) Tokens(ctx context.Context, userID uint64) (_ []*model.Token, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	rows, err := db.pool.Query(ctx, `SELECT hash, handle, created_at, expires_at, last_used_at FROM tokens
		WHERE user_id = $1 AND expires_at > $2 ORDER BY created_at DESC, hash`, int64(userID), db.clock())
	if err != nil {
		return nil, err
	}
	out, err := collectRows(rows, func(row pgx.Row) (*model.Token, error) {
		t := &model.Token{UserID: userID}
		var hash, handle []byte
		if err := row.Scan(&hash, &handle, &t.CreatedAt, &t.ExpiresAt, &t.LastUsedAt); err != nil {
			return nil, err
		}
		copy(t.Hash[:], hash)
		copy(t.ID[:], handle)
		t.CreatedAt, t.ExpiresAt, t.LastUsedAt = t.CreatedAt.UTC(), t.ExpiresAt.UTC(), t.LastUsedAt.UTC()
		return t, nil
	})
	if err != nil {
		return nil, err
	}
	for _, t := range out {
		t.LastUsedAt = db.uses.LastUse(t)
	}
	return out, nil
}

// sweepChunk bounds the tokens one sweep transaction deletes.
const sweepChunk = 500

// SweepExpiredTokens deletes expired tokens, sweepChunk per transaction,
// and returns how many it deleted. Expired tokens are refused anyway; the
// sweep keeps them from piling up. Streams end on their token's expiry by
// themselves, so no revocation is logged.
func (db *DB) SweepExpiredTokens(ctx context.Context) (int, error) {
	deleted := 0
	for {
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
		tag, err := db.pool.Exec(ctx, `DELETE FROM tokens WHERE hash IN (
			SELECT hash FROM tokens WHERE expires_at <= $1 LIMIT $2)`, db.clock(), sweepChunk)
		if err != nil {
			return deleted, err
		}
		n := rowsAffected(tag)
		deleted += n
		if n < sweepChunk {
			return deleted, nil
		}
	}
}
