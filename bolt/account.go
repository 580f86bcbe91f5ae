package bolt

import (
	"context"
	"fmt"
	"math"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// Deleting an account. The account itself — user record, e-mail index
// entry, every token — goes in one transaction, and from that commit on
// nothing of it is visible: its messages can no longer be read, found or
// changed, since every read joins a message to its owner and a message
// without one does not exist (see joinOwner). The messages and their index
// entries are then removed purgeChunk at a time, so an account with a
// hundred thousand messages never holds the writer for long. The account's
// ID stays in the deleting bucket until its last message is gone, and Open
// finishes any purge a crash interrupted.

// purgeChunk is how many messages one purge transaction removes.
const purgeChunk = 1000

// DeleteAccount deletes the caller's account, its tokens and its messages.
// When it returns nil, all of it is gone, or (if removing the messages
// failed) invisible until the next Open removes it. Its tokens go in the
// first transaction, so their watchers (WatchTokenDeletions) hear before the
// purge, which may take a while. Errors: model.ErrUnauthorized, model.ErrNotFound.
func (db *DB) DeleteAccount(_ context.Context, by model.Caller) error {
	var userID uint64
	err := db.writes.update(func(tx *bbolt.Tx) error {
		u, err := db.caller(tx, by)
		if err != nil {
			return err
		}
		userID = u.ID
		return db.removeAccount(tx, u)
	})
	if err != nil {
		return err
	}
	// From here the account is gone for everyone; a purge that fails (the
	// server stopping, say) is finished by the next Open, so the caller is
	// told the truth: deleted.
	if err := db.purgeMessages(userID); err != nil {
		db.log.Warn("removing a deleted account's messages; the next start finishes it", "user", userID, "err", err)
	}
	return nil
}

// removeAccount is DeleteAccount's first transaction: the account and its
// tokens go, and its messages are marked for the purge.
func (db *DB) removeAccount(tx *bbolt.Tx, u *model.User) error {
	if err := db.revokeTokensExcept(tx, u.ID, model.TokenHash{}); err != nil {
		return err
	}
	if err := tx.Bucket(bucketUsersByEmail).Delete(emailKey(u.Email)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketUsers).Delete(itob(u.ID)); err != nil {
		return err
	}
	// The e-mail is kept for the purge's change records: streams
	// filtering by this owner hear that the messages are gone.
	return tx.Bucket(bucketDeleting).Put(itob(u.ID), []byte(u.Email))
}

// deletedAccountEmail is the e-mail a deleted account's deleting mark
// keeps for the change records of its messages' removal; empty when the
// account is not being deleted, or was by a release before the mark held
// it.
func deletedAccountEmail(tx *bbolt.Tx, userID uint64) string {
	return string(tx.Bucket(bucketDeleting).Get(itob(userID)))
}

// purgeMessages removes a deleted account's messages with their index
// entries, newest first, then its deleting mark. The account is gone, so
// no message of it appears meanwhile: each transaction goes on below the
// last one removed.
func (db *DB) purgeMessages(userID uint64) error {
	below := uint64(math.MaxUint64)
	for done := false; !done; {
		var lowest uint64
		err := db.writes.update(func(tx *bbolt.Tx) error {
			done, lowest = false, 0
			email := deletedAccountEmail(tx, userID)
			chunk, err := db.ownerMessages(tx, userID, below, purgeChunk)
			if err != nil {
				return err
			}
			for _, m := range chunk {
				m.OwnerEmail = email
				if err := db.removeMessage(tx, m); err != nil {
					return err
				}
				lowest = m.ID
			}
			if len(chunk) < purgeChunk {
				done = true
				return tx.Bucket(bucketDeleting).Delete(itob(userID))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("removing the messages of deleted account %d: %w", userID, err)
		}
		below = lowest
	}
	return nil
}

// resumePurges finishes the purges a crash interrupted.
func (db *DB) resumePurges() error {
	var pending []uint64
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketDeleting).ForEach(func(k, _ []byte) error {
			pending = append(pending, btoi(k))
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, id := range pending {
		db.log.Info("finishing the deletion of an account", "user", id)
		if err := db.purgeMessages(id); err != nil {
			return err
		}
	}
	return nil
}
