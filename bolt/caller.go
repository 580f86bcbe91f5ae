package bolt

import (
	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// Callers: a request's model.Caller resolved to its account inside the
// transaction that acts on it, so that what is checked of the caller is
// what the act sees.

// caller resolves by to its account inside tx, for a write. Errors:
// model.ErrUnauthorized for a token that no longer works and for
// model.ByServer, which has no account; model.ErrNotFound for an unknown
// user ID.
func (db *DB) caller(tx *bbolt.Tx, by model.Caller) (*model.User, error) {
	if hash, ok := by.Token(); ok {
		u, _, err := db.authenticate(tx, hash)
		return u, err
	}
	if by.Server() {
		return nil, model.AccountNeeded()
	}
	return userByID(tx, by.UserID())
}

// reader resolves by inside tx, for a read: nil for model.ByServer, which
// reads without an account. Errors: as caller.
func (db *DB) reader(tx *bbolt.Tx, by model.Caller) (*model.User, error) {
	if by.Server() {
		return nil, nil
	}
	return db.caller(tx, by)
}
