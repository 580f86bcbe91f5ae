package pg

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// Password resets: an administrator makes a code for an account and hands
// it over; its holder sets a new password with it, once, before it
// expires. An account has at most one outstanding reset.

// CreatePasswordReset stores a reset of account userID's password whose
// code hashes to code, valid for ttl, replacing any the account had, and
// writes an administrator's act to the audit log (one by model.ByServer,
// asked for by the account's owner, is none). Errors: model.ErrForbidden,
// model.ErrNotFound, model.ErrConflict for a code already in use.
func (db *DB) CreatePasswordReset(ctx context.Context, by model.Caller, userID uint64, code model.TokenHash, ttl time.Duration) (_ *model.PasswordReset, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	var out *model.PasswordReset
	err = db.write(ctx, func(w *writeTx) error {
		actor, err := w.admin(ctx, by)
		if err != nil {
			return err
		}
		u, err := w.lockedUser(ctx, userID)
		if err != nil {
			return err
		}
		if _, err := w.Exec(ctx, `DELETE FROM password_resets WHERE user_id = $1`, int64(userID)); err != nil {
			return err
		}
		now := db.clock()
		r := &model.PasswordReset{UserID: userID, CodeHash: code, CreatedAt: now, ExpiresAt: model.TokenExpiry(now, ttl)}
		_, err = w.Exec(ctx, `INSERT INTO password_resets (code_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
			code[:], int64(userID), r.CreatedAt, r.ExpiresAt)
		if uniqueViolation(err, "password_resets_code_unique") {
			return model.ResetCodeAlreadyIssued()
		}
		if err != nil {
			return err
		}
		out = r
		if by.Server() {
			return nil // asked for by the account's owner (by e-mail): no administrator's act
		}
		return w.audit(ctx, actor, &model.AuditEntry{Action: model.AuditPasswordReset, UserID: u.ID, UserEmail: u.Email})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// usableReset finds the reset a code's hash belongs to, at now. Errors:
// model.ResetCodeRefused.
func usableReset(ctx context.Context, q querier, code model.TokenHash, now time.Time, lock bool) (*model.PasswordReset, error) {
	sql := `SELECT user_id, created_at, expires_at FROM password_resets WHERE code_hash = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	r := &model.PasswordReset{CodeHash: code}
	var userID int64
	err := q.QueryRow(ctx, sql, code[:]).Scan(&userID, &r.CreatedAt, &r.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.ResetCodeRefused()
	}
	if err != nil {
		return nil, err
	}
	r.UserID, r.CreatedAt, r.ExpiresAt = uint64(userID), r.CreatedAt.UTC(), r.ExpiresAt.UTC()
	if !now.Before(r.ExpiresAt) {
		return nil, model.ResetCodeRefused()
	}
	return r, nil
}

// PasswordReset finds the reset a code's hash belongs to. Errors:
// model.ResetCodeRefused (unknown, used or expired).
func (db *DB) PasswordReset(ctx context.Context, code model.TokenHash) (_ *model.PasswordReset, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	return usableReset(ctx, db.pool, code, db.clock(), false)
}

// ResetPassword stores hash as the password of the account a reset code
// is for, uses the code up and deletes every token of the account, in one
// transaction. Errors: model.ResetCodeRefused.
func (db *DB) ResetPassword(ctx context.Context, code model.TokenHash, hash string) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	if hash == "" {
		return errors.New("reset password: empty password hash")
	}
	return db.write(ctx, func(w *writeTx) error {
		r, err := usableReset(ctx, w, code, db.clock(), true)
		if err != nil {
			return err
		}
		if _, err := w.Exec(ctx, `UPDATE users SET password_hash = $2 WHERE id = $1`, int64(r.UserID), hash); err != nil {
			return err
		}
		if _, err := w.Exec(ctx, `DELETE FROM password_resets WHERE code_hash = $1`, code[:]); err != nil {
			return err
		}
		return w.revokeTokensExcept(ctx, r.UserID, model.TokenHash{})
	})
}

// SweepExpiredCodes deletes the invitations and password resets that have
// expired, and returns how many. They are refused anyway; the sweep keeps
// them from piling up.
func (db *DB) SweepExpiredCodes(ctx context.Context) (int, error) {
	var n int
	err := db.pool.QueryRow(ctx, `WITH i AS (DELETE FROM invites WHERE expires_at <= $1 RETURNING 1),
		r AS (DELETE FROM password_resets WHERE expires_at <= $1 RETURNING 1)
		SELECT (SELECT count(*) FROM i) + (SELECT count(*) FROM r)`, db.clock()).Scan(&n)
	return n, err
}
