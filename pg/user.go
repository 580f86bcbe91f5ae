package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"herald/model"
)

// querier is what a pool and a transaction both offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

const userColumns = `id, email, password_hash, roles, created_at`

// scanUser reads a row of userColumns.
func scanUser(row pgx.Row) (*model.User, error) {
	var (
		u       model.User
		id      int64
		created time.Time
	)
	if err := row.Scan(&id, &u.Email, &u.PasswordHash, &u.Roles, &created); err != nil {
		return nil, err
	}
	u.ID, u.CreatedAt = uint64(id), created.UTC()
	return &u, nil
}

// CreateUser stores a new account with model.RoleUser and its first
// token, in one transaction: registration hands out a token. It sets
// u.ID, u.Roles and u.CreatedAt. Errors: model.ErrInvalid for a bad
// e-mail, model.ErrConflict when the e-mail is taken (in any letter case).
func (db *DB) CreateUser(ctx context.Context, u *model.User, tokenHash model.TokenHash, ttl time.Duration) (*model.Token, error) {
	nu := *u
	nu.Email = model.NormalizeEmail(nu.Email)
	var v model.ValidationError
	v.CheckEmail("email", nu.Email)
	if err := v.Err(); err != nil {
		return nil, err
	}
	if nu.PasswordHash == "" {
		return nil, fmt.Errorf("create user: empty password hash")
	}
	var tok *model.Token
	err := db.write(ctx, func(w *writeTx) error {
		created := db.clock()
		nu.Roles, nu.CreatedAt = []string{model.RoleUser}, created
		var id int64
		err := w.QueryRow(ctx, `INSERT INTO users (email, email_key, password_hash, roles, created_at)
			VALUES ($1, $2, $3, $4, $5) RETURNING id`,
			nu.Email, model.EmailKey(nu.Email), nu.PasswordHash, nu.Roles, created).Scan(&id)
		if uniqueViolation(err, "users_email_key_unique") {
			return model.Errorf(model.ErrConflict, "the e-mail %s is already registered", nu.Email)
		}
		if err != nil {
			return err
		}
		nu.ID = uint64(id)
		tok, err = w.issueToken(ctx, tokenHash, nu.ID, created, ttl)
		return err
	})
	if err != nil {
		return nil, err
	}
	// Only now, after the commit, so a failed write leaves u untouched.
	*u = nu
	return tok, nil
}

// UserByEmail finds an account by e-mail, in any letter case and with
// surrounding spaces ignored. Errors: model.ErrNotFound.
func (db *DB) UserByEmail(ctx context.Context, email string) (*model.User, error) {
	u, err := scanUser(db.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE email_key = $1`, model.EmailKey(email)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.Errorf(model.ErrNotFound, "no account has this e-mail")
	}
	return u, err
}

// UserByID finds an account by ID. Errors: model.ErrNotFound.
func (db *DB) UserByID(ctx context.Context, id uint64) (*model.User, error) {
	return userByID(ctx, db.pool, id)
}

func userByID(ctx context.Context, q querier, id uint64) (*model.User, error) {
	u, err := scanUser(q.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, int64(id)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.Errorf(model.ErrNotFound, "account %d does not exist", id)
	}
	return u, err
}

// SetPasswordHash replaces an account's stored hash, used to upgrade old
// hashing parameters on login. It changes nothing unless the stored hash
// is still oldHash: a password changed meanwhile must not be put back.
// Errors: model.ErrNotFound.
func (db *DB) SetPasswordHash(ctx context.Context, id uint64, oldHash, hash string) error {
	var exists bool
	err := db.pool.QueryRow(ctx, `WITH u AS (
			UPDATE users SET password_hash = $3 WHERE id = $1 AND password_hash = $2
		) SELECT EXISTS (SELECT 1 FROM users WHERE id = $1)`, int64(id), oldHash, hash).Scan(&exists)
	if err != nil {
		return err
	}
	if !exists {
		return model.Errorf(model.ErrNotFound, "account %d does not exist", id)
	}
	return nil
}

// ChangePassword stores the caller's new password hash and revokes every
// other token of theirs, in one transaction: whoever else held a session
// loses it the moment the new password is in force. The token making the
// request keeps working. Errors: model.ErrUnauthorized, model.ErrNotFound.
func (db *DB) ChangePassword(ctx context.Context, by model.Caller, hash string) error {
	if hash == "" {
		return fmt.Errorf("change password: empty password hash")
	}
	return db.write(ctx, func(w *writeTx) error {
		u, err := w.caller(ctx, by)
		if err != nil {
			return err
		}
		if _, err := w.Exec(ctx, `UPDATE users SET password_hash = $2 WHERE id = $1`, int64(u.ID), hash); err != nil {
			return err
		}
		keep, _ := by.Token() // a caller acting without a token keeps none
		return w.revokeTokensExcept(ctx, u.ID, keep)
	})
}
