package pg

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// Callers: a request's model.Caller resolved to its account inside the
// write transaction that acts on it, or in the round trip of the read it
// makes, so that what is checked of the caller is what the act sees.

// caller resolves by to its account inside the write transaction, for a
// write. A token is locked against deletion until the commit, so a
// logout that committed first wins and one that comes later waits.
// Errors: model.ErrUnauthorized for a token that no longer works and for
// model.ByServer, which has no account; model.ErrNotFound for an unknown
// user ID.
func (w *writeTx) caller(ctx context.Context, by model.Caller) (*model.User, error) {
	if hash, ok := by.Token(); ok {
		u, _, err := w.db.authenticate(ctx, w, hash, true)
		return u, err
	}
	if by.Server() {
		return nil, model.AccountNeeded()
	}
	return userByID(ctx, w, by.UserID())
}

// queueWriteCaller is queueCaller for a write's pipeline: a token is
// locked as caller locks it.
func (db *DB) queueWriteCaller(b *pgx.Batch, by model.Caller) resolver {
	if hash, ok := by.Token(); ok {
		b.Queue(authLockSQL, hash[:])
		return func(br pgx.BatchResults) (*model.User, error) {
			u, _, err := db.scanAuth(br.QueryRow(), hash)
			return u, err
		}
	}
	return db.queueCaller(b, by)
}

// resolver reads the caller's account in the round trip of a read.
type resolver func(br pgx.BatchResults) (*model.User, error)

// queueCaller queues the query that resolves by for a read and returns
// how to read its answer: nil for model.ByServer, which reads without an
// account. Errors, when the answer is read: model.ErrUnauthorized for a
// token that does not work, model.ErrNotFound for an unknown user ID.
func (db *DB) queueCaller(b *pgx.Batch, by model.Caller) resolver {
	if hash, ok := by.Token(); ok {
		b.Queue(authSQL, hash[:])
		return func(br pgx.BatchResults) (*model.User, error) {
			u, _, err := db.scanAuth(br.QueryRow(), hash)
			return u, err
		}
	}
	if by.Server() {
		return func(pgx.BatchResults) (*model.User, error) { return nil, nil }
	}
	id := by.UserID()
	b.Queue(`SELECT `+userColumns+` FROM users WHERE id = $1`, int64(id))
	return func(br pgx.BatchResults) (*model.User, error) {
		u, err := scanUser(br.QueryRow())
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, model.AccountNotFound(id)
		}
		return u, err
	}
}
