package bolt

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// Deleting an account. The account itself — user record, e-mail index
// entry, every token, its password reset — goes in one transaction, and
// from that commit on nothing of it is visible: its messages can no longer
// be read, found or changed, since every read joins a message to its owner and a message
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
// first transaction, whose revocation reaches live streams before the
// purge, which may take a while. Errors: model.ErrUnauthorized,
// model.ErrNotFound, model.ErrConflict when the caller is the last
// account able to administer.
func (db *DB) DeleteAccount(_ context.Context, by model.Caller) error {
	var userID uint64
	err := db.writes.update(func(tx *bbolt.Tx) error {
		u, err := db.caller(tx, by)
		if err != nil {
			return err
		}
		if err := keepAnAdministrator(tx, u, "deleted"); err != nil {
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
	db.finishPurge(userID)
	return nil
}

// removeAccount is the first transaction of an account's deletion: the
// account, its tokens, its password reset and its idempotency records go,
// and its messages are marked for the purge.
func (db *DB) removeAccount(tx *bbolt.Tx, u *model.User) error {
	if err := db.revokeTokensExcept(tx, u.ID, model.TokenHash{}); err != nil {
		return err
	}
	if err := deleteUserReset(tx, u.ID); err != nil {
		return err
	}
	if err := deleteIdempotencyOf(tx, u.ID); err != nil {
		return err
	}
	if err := removeNotificationsOf(tx, u.ID); err != nil {
		return err
	}
	if err := removePushSubscriptionsOf(tx, u.ID); err != nil {
		return err
	}
	if err := tx.Bucket(bucketUsersByEmail).Delete(emailKey(u.Email)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketUsersBySkeleton).Delete(skeletonKey(emailSkeleton(u.Email), u.ID)); err != nil {
		return err
	}
	// The handle is free for anyone: mentions hold account IDs, so
	// whoever takes it is never mentioned by what was written before.
	if err := tx.Bucket(bucketUsersByHandle).Delete([]byte(u.Handle)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketUsers).Delete(itob(u.ID)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketAdmins).Delete(itob(u.ID)); err != nil {
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

// finishPurge removes the messages the marks of account userID ask to
// remove (see purgeMessages). A failure is logged: the next Open finishes
// it.
func (db *DB) finishPurge(userID uint64) {
	if err := db.purgeMessages(userID); err != nil {
		db.log.Warn("removing an account's messages; the next start finishes it", "user", userID, "err", err)
	}
}

// purgeMessages removes the messages of userID that its marks ask to
// remove, with their index entries, newest first, purgeChunk per
// transaction, then the marks: every message when the account is deleted
// (the deleting bucket), those up to the marked message ID when an
// administrator removes them (the purging bucket). Nothing of a deleted
// account appears meanwhile, and what an administrator's removal keeps is
// newer than what it removes, so each transaction goes on below the last
// one removed.
//
// A newer removal may mark the account again while this one runs; the
// mark this one began with is the one it deletes, so the newer mark stays
// for the newer removal (or the next Open) to finish.
func (db *DB) purgeMessages(userID uint64) error {
	below := uint64(math.MaxUint64)
	var began []byte // the purging mark when the first chunk read it
	first := true
	for done := false; !done; {
		var lowest uint64
		err := db.writes.update(func(tx *bbolt.Tx) error {
			done, lowest = false, 0
			deleting := tx.Bucket(bucketDeleting).Get(itob(userID))
			purging := tx.Bucket(bucketPurging).Get(itob(userID))
			if first {
				began = bytes.Clone(purging)
			}
			limit := below
			switch {
			case deleting != nil:
			case len(purging) == 8:
				limit = min(below, btoi(purging)+1)
			default:
				done = true // nothing left to remove
				return nil
			}
			email, ok := userEmail(tx.Bucket(bucketUsers).Get(itob(userID)))
			if !ok {
				email = deletedAccountEmail(tx, userID)
			}
			chunk, err := db.ownerMessages(tx, userID, limit, purgeChunk)
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
				if deleting != nil || bytes.Equal(purging, began) {
					if err := tx.Bucket(bucketPurging).Delete(itob(userID)); err != nil {
						return err
					}
				}
				return tx.Bucket(bucketDeleting).Delete(itob(userID))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("removing the messages of account %d: %w", userID, err)
		}
		first = false
		below = lowest
	}
	return nil
}

// ResumePurges goes on with the removals of messages (an account's
// deletion, an administrator's removal of an account's messages) that a
// full disk cut short, once there is room, without waiting for a restart.
func (db *DB) ResumePurges(context.Context) error { return db.resumePurges() }

// resumePurges finishes the purges a crash interrupted.
func (db *DB) resumePurges() error {
	pending := make(map[uint64]bool)
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketDeleting, bucketPurging} {
			err := tx.Bucket(name).ForEach(func(k, _ []byte) error {
				pending[btoi(k)] = true
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(pending)) {
		db.log.Info("finishing the removal of an account's messages", "user", id)
		if err := db.purgeMessages(id); err != nil {
			return err
		}
	}
	return nil
}
