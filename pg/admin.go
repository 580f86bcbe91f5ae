package pg

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// Administration: what administrators do to accounts. Each operation
// checks its caller's role inside its own transaction and writes its act
// to the audit log in that same transaction.

// lockAdmins is taken, for the rest of its transaction, by a write that
// may leave one administrator fewer: two administrators demoting each
// other at once would each see the other still there.
const lockAdmins = 3

// lockHandles is held, to the commit, by the write that gives an account
// its handle (see takeHandle).
const lockHandles = 5

// admin resolves by inside the write transaction and returns it if it may
// administer: an account holding model.RoleAdmin that is not suspended,
// or nil for model.ByServer, the operator on the server's machine.
// Errors: model.ErrForbidden for anyone else, model.ErrUnauthorized for a
// token that no longer works.
func (w *writeTx) admin(ctx context.Context, by model.Caller) (*model.User, error) {
	if by.Server() {
		return nil, nil
	}
	u, err := w.caller(ctx, by)
	if err != nil {
		return nil, err
	}
	if err := w.lockRoles(ctx, u); err != nil {
		return nil, err
	}
	if !u.CanAdminister() {
		return nil, model.AdministratorNeeded()
	}
	return u, nil
}

// lockRoles reads u's roles and suspension again, as last committed, and
// share-locks its row until the commit. The caller's row read with its
// token was not locked, and an administrator's role taken away while the
// act waited for a lock would otherwise still allow it, and the audit log
// show it after the role was gone. With the row share-locked, a change of
// roles or a suspension, which takes the row FOR NO KEY UPDATE, waits for
// the act; an act that waited for the change reads what it left.
// Errors: model.ErrUnauthorized when the account is gone.
func (w *writeTx) lockRoles(ctx context.Context, u *model.User) error {
	err := w.QueryRow(ctx, `SELECT roles, suspended FROM users WHERE id = $1 FOR SHARE`, int64(u.ID)).Scan(&u.Roles, &u.Suspended)
	if errors.Is(err, pgx.ErrNoRows) {
		return model.AccountGone()
	}
	return err
}

// lockedUser reads account id with its row locked until the commit, so
// that what is checked of it holds when the write lands. The lock is
// FOR NO KEY UPDATE: it orders this write with every other that changes
// the row, but not with a create by the account, whose foreign key takes
// a key-share lock on the row while the create holds the change log's
// counter; FOR UPDATE would make a suspension and a create of the same
// account wait for each other (a deadlock PostgreSQL breaks only after
// deadlock_timeout, every instance's writes waiting on the counter until
// then). A deletion takes FOR UPDATE later, once the account's tokens
// are gone (removeAccount). Errors: model.ErrNotFound.
func (w *writeTx) lockedUser(ctx context.Context, id uint64) (*model.User, error) {
	u, err := scanUser(w.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1 FOR NO KEY UPDATE`, int64(id)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.AccountNotFound(id)
	}
	return u, err
}

// HasAdministrator reports whether any account can administer: one with
// the role that is not suspended.
func (db *DB) HasAdministrator(ctx context.Context) (found bool, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	err = db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users
		WHERE '`+model.RoleAdmin+`' = ANY (roles) AND NOT suspended)`).Scan(&found)
	return found, err
}

// keepAnAdministrator refuses to let u, whose row the transaction has
// locked, stop administering when no one else could.
func (w *writeTx) keepAnAdministrator(ctx context.Context, u *model.User, what string) error {
	if !u.CanAdminister() {
		return nil
	}
	if _, err := w.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, lockSpace, lockAdmins); err != nil {
		return err
	}
	var others bool
	err := w.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users
		WHERE '`+model.RoleAdmin+`' = ANY (roles) AND NOT suspended AND id <> $1)`, int64(u.ID)).Scan(&others)
	if err != nil {
		return err
	}
	if !others {
		return model.LastAdministrator(u, what)
	}
	return nil
}

// adminRead runs fn in a read-only transaction, one snapshot, after
// checking there that by may administer.
func (db *DB) adminRead(ctx context.Context, by model.Caller, fn func(tx pgx.Tx) error) error {
	tx, err := db.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if !by.Server() {
		var u *model.User
		if hash, ok := by.Token(); ok {
			u, _, err = db.authenticate(ctx, tx, hash, false)
		} else {
			u, err = userByID(ctx, tx, by.UserID())
		}
		if err != nil {
			return err
		}
		if !u.CanAdminister() {
			return model.AdministratorNeeded()
		}
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// accountColumns is userColumns with the account's message count.
const accountColumns = userColumns + `, (SELECT count(*) FROM messages m WHERE m.owner_id = users.id)`

func scanAccount(row pgx.Row) (*model.Account, error) {
	a := &model.Account{}
	var (
		id      int64
		created time.Time
		seen    *time.Time
		count   int64
	)
	if err := row.Scan(&id, &a.Email, &a.PasswordHash, &a.Roles, &created, &a.Suspended, &seen, &a.Handle, &a.Name, &count); err != nil {
		return nil, err
	}
	a.ID, a.CreatedAt, a.Messages = uint64(id), created.UTC(), int(count)
	if seen != nil {
		a.LastSeenAt = seen.UTC()
	}
	return a, nil
}

// account reads account id with its message count. Errors:
// model.ErrNotFound.
func account(ctx context.Context, q querier, id uint64) (*model.Account, error) {
	a, err := scanAccount(q.QueryRow(ctx, `SELECT `+accountColumns+` FROM users WHERE id = $1`, int64(id)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.AccountNotFound(id)
	}
	return a, err
}

// idsBelow is a cursor as the bound of IDs below it: every ID for none (0)
// or one beyond what PostgreSQL's bigint holds.
func idsBelow(cursor uint64) int64 {
	if cursor == 0 || cursor > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(cursor)
}

// ListAccounts pages through the accounts, newest first, those whose
// e-mail holds q.Match. Errors: model.ErrForbidden.
func (db *DB) ListAccounts(ctx context.Context, by model.Caller, q model.AccountQuery) (_ *model.AccountPage, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	limit := q.PageLimit()
	before := idsBelow(q.BeforeID)
	page := &model.AccountPage{}
	err = db.adminRead(ctx, by, func(tx pgx.Tx) error {
		// strpos, not LIKE: the match is any text, % and _ included, and
		// email_key is compared byte for byte, as model.EmailKey made it.
		match := model.EmailKey(q.Match)
		matchable := !holdsNUL(match)
		if !matchable {
			match = ""
		}
		rows, err := tx.Query(ctx, `SELECT `+accountColumns+` FROM users
			WHERE $4 AND id < $1 AND ($2 = '' OR strpos(email_key, $2) > 0)
			ORDER BY id DESC LIMIT $3`, before, match, limit+1, matchable)
		if err != nil {
			return err
		}
		page.Accounts, err = collectRows(rows, scanAccount)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(page.Accounts) > limit {
		page.Accounts = page.Accounts[:limit]
		page.NextBeforeID = page.Accounts[limit-1].ID
	}
	return page, nil
}

// Account reads one account. Errors: model.ErrForbidden,
// model.ErrNotFound.
func (db *DB) Account(ctx context.Context, by model.Caller, id uint64) (_ *model.Account, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	var a *model.Account
	err = db.adminRead(ctx, by, func(tx pgx.Tx) error {
		var err error
		a, err = account(ctx, tx, id)
		return err
	})
	return a, err
}

// UpdateAccount suspends an account or lifts its suspension, grants or
// revokes the administrator role, and writes each change to the audit
// log. A suspension deletes every token of the account (its streams end,
// on every instance) and its outstanding password reset. Errors:
// model.ErrForbidden, model.ErrNotFound, model.ErrConflict when the
// change would leave no account able to administer.
func (db *DB) UpdateAccount(ctx context.Context, by model.Caller, id uint64, upd model.AccountUpdate) (_ *model.Account, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	var out *model.Account
	err = db.write(ctx, func(w *writeTx) error {
		actor, err := w.admin(ctx, by)
		if err != nil {
			return err
		}
		u, err := w.lockedUser(ctx, id)
		if err != nil {
			return err
		}
		before := *u
		acts := upd.Apply(u)
		if what := model.StopsAdministering(&before, u); what != "" {
			if err := w.keepAnAdministrator(ctx, &before, what); err != nil {
				return err
			}
		}
		if u.Suspended && !before.Suspended {
			if err := w.revokeTokensExcept(ctx, u.ID, model.TokenHash{}); err != nil {
				return err
			}
			if _, err := w.Exec(ctx, `DELETE FROM password_resets WHERE user_id = $1`, int64(u.ID)); err != nil {
				return err
			}
		}
		if len(acts) > 0 {
			if _, err := w.Exec(ctx, `UPDATE users SET suspended = $2, roles = $3 WHERE id = $1`, int64(u.ID), u.Suspended, u.Roles); err != nil {
				return err
			}
		}
		for _, act := range acts {
			if err := w.audit(ctx, actor, &model.AuditEntry{Action: act, UserID: u.ID, UserEmail: u.Email}); err != nil {
				return err
			}
		}
		out, err = account(ctx, w, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RemoveAccount deletes account id, its tokens and its messages, as
// DeleteAccount does for the account's owner, and writes the act to the
// audit log, in one transaction. Errors: model.ErrForbidden,
// model.ErrNotFound, model.ErrConflict for the last account able to
// administer.
func (db *DB) RemoveAccount(ctx context.Context, by model.Caller, id uint64) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	return db.write(ctx, func(w *writeTx) error {
		actor, err := w.admin(ctx, by)
		if err != nil {
			return err
		}
		u, err := w.lockedUser(ctx, id)
		if err != nil {
			return err
		}
		if err := w.keepAnAdministrator(ctx, u, "deleted"); err != nil {
			return err
		}
		if err := w.audit(ctx, actor, &model.AuditEntry{Action: model.AuditDeleteAccount, UserID: u.ID, UserEmail: u.Email}); err != nil {
			return err
		}
		return w.removeAccount(ctx, u)
	})
}

// RemoveMessagesOf deletes every message account id holds now, newest
// first, each with its message.deleted change, in one transaction that
// also writes the act to the audit log, and returns how many. Messages
// the account writes after the act are kept. Errors: model.ErrForbidden,
// model.ErrNotFound.
func (db *DB) RemoveMessagesOf(ctx context.Context, by model.Caller, id uint64) (_ int, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	var count int
	err = db.write(ctx, func(w *writeTx) error {
		actor, err := w.admin(ctx, by)
		if err != nil {
			return err
		}
		// A key-share lock: the account cannot be deleted under the
		// removal, which would count and audit nothing for a gone account.
		u, err := scanUser(w.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1 FOR KEY SHARE`, int64(id)))
		if errors.Is(err, pgx.ErrNoRows) {
			return model.AccountNotFound(id)
		}
		if err != nil {
			return err
		}
		// The messages are locked as they are counted, so the purge below
		// deletes exactly these: message IDs are given out in commit
		// order, so none at or below the newest seen can still appear.
		var upTo int64
		err = w.QueryRow(ctx, `SELECT count(*), coalesce(max(id), 0) FROM (
			SELECT id FROM messages WHERE owner_id = $1 FOR UPDATE) m`, int64(id)).Scan(&count, &upTo)
		if err != nil {
			return err
		}
		if err := w.audit(ctx, actor, &model.AuditEntry{Action: model.AuditDeleteMessages, UserID: u.ID, UserEmail: u.Email, Count: count}); err != nil {
			return err
		}
		if count > 0 {
			w.purge = &purge{where: "m.owner_id = $18 AND m.id <= $19", args: []any{int64(id), upTo}, newestFirst: true}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return count, nil
}
