package pg

import (
	"context"

	"herald/model"
)

// purge is a deletion of many messages that a write transaction ends
// with: the messages go in its last statement, each with its
// message.deleted change, whatever their number, without passing through
// this process (see finishSQL).
type purge struct {
	// where selects the messages of m to delete; its own parameters
	// start at $18.
	where string
	args  []any
	// newestFirst orders the changes by descending ID.
	newestFirst bool
	// account, when set, is deleted in the same statement, after its
	// messages, and email is the e-mail their changes carry.
	account uint64
	email   string
}

// DeleteAccount deletes the caller's account, its tokens and its
// messages, in one transaction, each message with its message.deleted
// change (carrying the e-mail, so streams filtering by that owner hear of
// it) and the tokens with a revocation, so every instance's streams of
// the account end. Errors: model.ErrUnauthorized, model.ErrNotFound,
// model.ErrConflict when the caller is the last account able to
// administer.
func (db *DB) DeleteAccount(ctx context.Context, by model.Caller) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	return db.write(ctx, func(w *writeTx) error {
		u, err := w.caller(ctx, by)
		if err != nil {
			return err
		}
		// Read again under the row's lock, whatever the caller's role
		// looked like: a grant committed meanwhile must be seen, or the
		// last administrator could go.
		if u, err = w.lockedUser(ctx, u.ID); err != nil {
			return err
		}
		if err := w.keepAnAdministrator(ctx, u, "deleted"); err != nil {
			return err
		}
		return w.removeAccount(ctx, u)
	})
}

// removeAccount ends the transaction with the deletion of account u, its
// tokens, its password reset and its messages.
func (w *writeTx) removeAccount(ctx context.Context, u *model.User) error {
	// Tokens first: a write of this account in flight holds its token
	// and, through its message's foreign key, the account's row;
	// deleting the tokens waits for it to end, and no new write can
	// start, before the account's row is locked.
	if err := w.revokeTokensExcept(ctx, u.ID, model.TokenHash{}); err != nil {
		return err
	}
	if _, err := w.Exec(ctx, `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, int64(u.ID)); err != nil {
		return err
	}
	w.purge = &purge{where: "m.owner_id = $18", args: []any{int64(u.ID)}, newestFirst: true, account: u.ID, email: u.Email}
	return nil
}
