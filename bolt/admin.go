package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// Administration: what administrators do to accounts. Each operation
// checks its caller's role inside its own transaction and writes its act
// to the audit log in that same transaction.

// admin resolves by inside tx and returns it if it may administer: an
// account holding model.RoleAdmin that is not suspended, or nil for
// model.ByServer, the operator on the server's machine. Errors:
// model.ErrForbidden for anyone else, model.ErrUnauthorized for a token
// that no longer works.
func (db *DB) admin(tx *bbolt.Tx, by model.Caller) (*model.User, error) {
	if by.Server() {
		return nil, nil
	}
	u, err := db.caller(tx, by)
	if err != nil {
		return nil, err
	}
	if !u.CanAdminister() {
		return nil, model.AdministratorNeeded()
	}
	return u, nil
}

// othersCanAdminister reports whether an account other than userID can
// administer, so that userID may stop being able to.
func othersCanAdminister(tx *bbolt.Tx, userID uint64) (bool, error) {
	c := tx.Bucket(bucketAdmins).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if btoi(k) == userID {
			continue
		}
		u, err := userByID(tx, btoi(k))
		if err != nil {
			return false, err
		}
		if u.CanAdminister() {
			return true, nil
		}
	}
	return false, nil
}

// HasAdministrator reports whether any account can administer: one with
// the role that is not suspended.
func (db *DB) HasAdministrator(context.Context) (bool, error) {
	var found bool
	err := db.view(func(tx *bbolt.Tx) (err error) {
		found, err = othersCanAdminister(tx, 0) // no account has ID 0
		return err
	})
	return found, err
}

// keepAnAdministrator refuses to let u stop administering when no one
// else could.
func keepAnAdministrator(tx *bbolt.Tx, u *model.User, what string) error {
	if !u.CanAdminister() {
		return nil
	}
	ok, err := othersCanAdminister(tx, u.ID)
	if err != nil {
		return err
	}
	if !ok {
		return model.LastAdministrator(u, what)
	}
	return nil
}

// accountsPerPage bounds the accounts one page of ListAccounts looks at,
// so a search for a rare part of an e-mail among many accounts returns a
// short page and a cursor rather than reading every account.
const accountsPerPage = 20000

// ListAccounts pages through the accounts, newest first, those whose
// e-mail holds q.Match. Errors: model.ErrForbidden.
func (db *DB) ListAccounts(_ context.Context, by model.Caller, q model.AccountQuery) (*model.AccountPage, error) {
	limit := q.PageLimit()
	match := model.EmailKey(q.Match)
	var page *model.AccountPage
	err := db.view(func(tx *bbolt.Tx) error {
		page = &model.AccountPage{}
		if _, err := db.admin(tx, by); err != nil {
			return err
		}
		c := tx.Bucket(bucketUsers).Cursor()
		seen := 0
		for k, v := lastBelow(c, q.BeforeID); k != nil; k, v = c.Prev() {
			if seen++; seen > accountsPerPage {
				page.NextBeforeID = btoi(k) + 1
				break
			}
			u, err := decodeUser(btoi(k), v)
			if err != nil {
				return err
			}
			if match != "" && !strings.Contains(model.EmailKey(u.Email), match) {
				continue
			}
			if len(page.Accounts) == limit {
				page.NextBeforeID = page.Accounts[limit-1].ID
				break
			}
			page.Accounts = append(page.Accounts, &model.Account{User: *u})
		}
		for _, a := range page.Accounts {
			n, err := db.countOwnerMessages(tx, a.ID)
			if err != nil {
				return err
			}
			a.Messages = n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// Account reads one account. Errors: model.ErrForbidden,
// model.ErrNotFound.
func (db *DB) Account(_ context.Context, by model.Caller, id uint64) (*model.Account, error) {
	var a *model.Account
	err := db.view(func(tx *bbolt.Tx) error {
		if _, err := db.admin(tx, by); err != nil {
			return err
		}
		var err error
		a, err = db.account(tx, id)
		return err
	})
	return a, err
}

// account reads account id with its message count inside tx.
func (db *DB) account(tx *bbolt.Tx, id uint64) (*model.Account, error) {
	u, err := userByID(tx, id)
	if err != nil {
		return nil, err
	}
	n, err := db.countOwnerMessages(tx, id)
	if err != nil {
		return nil, err
	}
	return &model.Account{User: *u, Messages: n}, nil
}

// view runs fn in a read transaction, again in a newer one when a merge of
// the search index's tail ended between the transaction and the memory
// fn read (errStaleTail).
func (db *DB) view(fn func(tx *bbolt.Tx) error) error {
	for {
		err := db.bolt.View(fn)
		if !errors.Is(err, errStaleTail) {
			return err
		}
	}
}

// countOwnerMessages counts the messages of owner in tx through the
// owner's term: the postings up to the merge watermark, and the tail's
// candidates above it that tx holds as owner's.
func (db *DB) countOwnerMessages(tx *bbolt.Tx, owner uint64) (int, error) {
	term := ownerTerm(owner)
	merged := readTermsState(tx).merged
	base, tails := db.tail.lists([]string{term})
	if base > merged {
		return 0, errStaleTail
	}
	n := 0
	msgs := newIDReader(tx.Bucket(bucketMessages))
	for _, id := range tails[0] {
		if id <= merged {
			continue
		}
		if rec := msgs.get(id); len(rec) >= messageHeaderLen && binary.BigEndian.Uint64(rec[1:]) == owner {
			n++
		}
	}
	blocks := termBlocks(tx.Bucket(bucketPostings), []byte(term))
	var ids []uint64
	c := blocks.b.Cursor()
	for k, v := c.Seek(blocks.prefix); ; k, v = c.Next() {
		first, ok := blocks.firstOf(k)
		if !ok || first > merged {
			return n, nil
		}
		if ids, ok = decodeBlockUpTo(ids[:0], first, v, merged); !ok {
			return 0, blocks.malformed(first)
		}
		n += len(ids)
	}
}

// UpdateAccount suspends an account or lifts its suspension, grants or
// revokes the administrator role, and writes each change to the audit
// log. A suspension deletes every token of the account (its streams end)
// and its outstanding password reset. Errors: model.ErrForbidden,
// model.ErrNotFound, model.ErrConflict when the change would leave no
// account able to administer.
func (db *DB) UpdateAccount(_ context.Context, by model.Caller, id uint64, upd model.AccountUpdate) (*model.Account, error) {
	var out *model.Account
	err := db.writes.update(func(tx *bbolt.Tx) error {
		actor, err := db.admin(tx, by)
		if err != nil {
			return err
		}
		u, err := userByID(tx, id)
		if err != nil {
			return err
		}
		before := *u
		acts := upd.Apply(u)
		if what := model.StopsAdministering(&before, u); what != "" {
			if err := keepAnAdministrator(tx, &before, what); err != nil {
				return err
			}
		}
		if u.Suspended && !before.Suspended {
			if err := db.revokeTokensExcept(tx, u.ID, model.TokenHash{}); err != nil {
				return err
			}
			if err := deleteUserReset(tx, u.ID); err != nil {
				return err
			}
		}
		if len(acts) > 0 {
			if err := db.putUser(tx, u); err != nil {
				return err
			}
		}
		for _, act := range acts {
			if err := db.appendAudit(tx, actor, &model.AuditEntry{Action: act, UserID: u.ID, UserEmail: u.Email}); err != nil {
				return err
			}
		}
		out, err = db.account(tx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RemoveAccount deletes account id, its tokens and its messages, as
// DeleteAccount does for the account's owner, and writes the act to the
// audit log. Errors: model.ErrForbidden, model.ErrNotFound,
// model.ErrConflict for the last account able to administer.
func (db *DB) RemoveAccount(_ context.Context, by model.Caller, id uint64) error {
	err := db.writes.update(func(tx *bbolt.Tx) error {
		actor, err := db.admin(tx, by)
		if err != nil {
			return err
		}
		u, err := userByID(tx, id)
		if err != nil {
			return err
		}
		if err := keepAnAdministrator(tx, u, "deleted"); err != nil {
			return err
		}
		if err := db.appendAudit(tx, actor, &model.AuditEntry{Action: model.AuditDeleteAccount, UserID: u.ID, UserEmail: u.Email}); err != nil {
			return err
		}
		return db.removeAccount(tx, u)
	})
	if err != nil {
		return err
	}
	db.finishPurge(id)
	return nil
}

// RemoveMessagesOf deletes every message account id holds now, newest
// first, purgeChunk per transaction, and returns how many. The first
// transaction writes the act to the audit log and marks the account in
// the purging bucket with its newest message, so that a removal cut short
// (by a crash, or a full disk) is finished later, by the chores or the
// next Open, and messages written after the act are kept. Errors:
// model.ErrForbidden, model.ErrNotFound; a failure of the removal itself
// after the act was recorded (model.ErrNoSpace, say), which leaves it to
// be finished later.
func (db *DB) RemoveMessagesOf(_ context.Context, by model.Caller, id uint64) (int, error) {
	var count int
	var upTo uint64
	mark := func(tx *bbolt.Tx) error {
		actor, err := db.admin(tx, by)
		if err != nil {
			return err
		}
		u, err := userByID(tx, id)
		if err != nil {
			return err
		}
		if count, err = db.countOwnerMessages(tx, id); err != nil {
			return err
		}
		upTo = tx.Bucket(bucketMessages).Sequence()
		if err := db.appendAudit(tx, actor, &model.AuditEntry{Action: model.AuditDeleteMessages, UserID: u.ID, UserEmail: u.Email, Count: count}); err != nil {
			return err
		}
		return tx.Bucket(bucketPurging).Put(itob(id), itob(upTo))
	}
	err := db.writes.update(mark)
	for errors.Is(err, errStaleTail) {
		// The count read the tail as a merge moved it; again, newer.
		err = db.writes.update(mark)
	}
	if err != nil {
		return 0, err
	}
	return count, db.purgeMessages(id)
}
