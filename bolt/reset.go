package bolt

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// Password resets: an administrator makes a code for an account and hands
// it over; its holder sets a new password with it, once, before it
// expires. An account has at most one outstanding reset.

// Reset record layout: a version byte, userID, createdAt and expiresAt (8
// each).
const (
	resetRecordVersion = 1
	resetRecordLen     = 1 + 8 + 8 + 8
)

func encodeReset(r *model.PasswordReset) []byte {
	b := make([]byte, 0, resetRecordLen)
	b = append(b, resetRecordVersion)
	b = binary.BigEndian.AppendUint64(b, r.UserID)
	b = binary.BigEndian.AppendUint64(b, uint64(timeToMicros(r.CreatedAt)))
	return binary.BigEndian.AppendUint64(b, uint64(timeToMicros(r.ExpiresAt)))
}

func decodeReset(code model.TokenHash, b []byte) (*model.PasswordReset, error) {
	if len(b) != resetRecordLen || b[0] != resetRecordVersion {
		return nil, fmt.Errorf("decode password reset %x…: bad record", code[:4])
	}
	return &model.PasswordReset{
		CodeHash:  code,
		UserID:    binary.BigEndian.Uint64(b[1:]),
		CreatedAt: microsToTime(int64(binary.BigEndian.Uint64(b[9:]))),
		ExpiresAt: microsToTime(int64(binary.BigEndian.Uint64(b[17:]))),
	}, nil
}

// CreatePasswordReset stores a reset of account userID's password whose
// code hashes to code, valid for ttl, replacing any the account had, and
// writes an administrator's act to the audit log (one by model.ByServer,
// asked for by the account's owner, is none). Errors: model.ErrForbidden,
// model.ErrNotFound, model.ErrConflict for a code already in use.
func (db *DB) CreatePasswordReset(_ context.Context, by model.Caller, userID uint64, code model.TokenHash, ttl time.Duration) (*model.PasswordReset, error) {
	var out *model.PasswordReset
	err := db.writes.update(func(tx *bbolt.Tx) error {
		actor, err := db.admin(tx, by)
		if err != nil {
			return err
		}
		u, err := userByID(tx, userID)
		if err != nil {
			return err
		}
		if tx.Bucket(bucketResets).Get(code[:]) != nil {
			return model.ResetCodeAlreadyIssued()
		}
		if err := deleteUserReset(tx, userID); err != nil {
			return err
		}
		now := db.clock()
		r := &model.PasswordReset{UserID: userID, CodeHash: code, CreatedAt: now, ExpiresAt: model.TokenExpiry(now, ttl)}
		if err := tx.Bucket(bucketResets).Put(code[:], encodeReset(r)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketUserResets).Put(itob(userID), code[:]); err != nil {
			return err
		}
		out = r
		if by.Server() {
			return nil // asked for by the account's owner (by e-mail): no administrator's act
		}
		return db.appendAudit(tx, actor, &model.AuditEntry{Action: model.AuditPasswordReset, UserID: u.ID, UserEmail: u.Email})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// deleteUserReset removes account userID's outstanding reset, if any.
func deleteUserReset(tx *bbolt.Tx, userID uint64) error {
	byUser := tx.Bucket(bucketUserResets)
	code := byUser.Get(itob(userID))
	if code == nil {
		return nil
	}
	if err := tx.Bucket(bucketResets).Delete(code); err != nil {
		return err
	}
	return byUser.Delete(itob(userID))
}

// usableReset finds the reset a code's hash belongs to, at now. Errors:
// model.ResetCodeRefused.
func usableReset(tx *bbolt.Tx, code model.TokenHash, now time.Time) (*model.PasswordReset, error) {
	b := tx.Bucket(bucketResets).Get(code[:])
	if b == nil {
		return nil, model.ResetCodeRefused()
	}
	r, err := decodeReset(code, b)
	if err != nil {
		return nil, err
	}
	if !now.Before(r.ExpiresAt) {
		return nil, model.ResetCodeRefused()
	}
	return r, nil
}

// PasswordReset finds the reset a code's hash belongs to. Errors:
// model.ResetCodeRefused (unknown, used or expired).
func (db *DB) PasswordReset(_ context.Context, code model.TokenHash) (*model.PasswordReset, error) {
	var r *model.PasswordReset
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		var err error
		r, err = usableReset(tx, code, db.clock())
		return err
	})
	return r, err
}

// ResetPassword stores hash as the password of the account a reset code
// is for, uses the code up and deletes every token of the account, in one
// transaction. Errors: model.ResetCodeRefused.
func (db *DB) ResetPassword(_ context.Context, code model.TokenHash, hash string) error {
	if hash == "" {
		return fmt.Errorf("reset password: empty password hash")
	}
	return db.writes.update(func(tx *bbolt.Tx) error {
		r, err := usableReset(tx, code, db.clock())
		if err != nil {
			return err
		}
		u, err := userByID(tx, r.UserID)
		if err != nil {
			return err
		}
		u.PasswordHash = hash
		if err := db.putUser(tx, u); err != nil {
			return err
		}
		if err := deleteUserReset(tx, u.ID); err != nil {
			return err
		}
		return db.revokeTokensExcept(tx, u.ID, model.TokenHash{})
	})
}

// SweepExpiredCodes deletes the invitations and password resets that have
// expired, and returns how many. They are refused anyway; the sweep keeps
// them from piling up. Both kinds are few, so one transaction each does.
func (db *DB) SweepExpiredCodes(context.Context) (int, error) {
	n := 0
	err := db.writes.update(func(tx *bbolt.Tx) error {
		n = 0
		now := db.clock()
		var invites []*model.Invite
		err := tx.Bucket(bucketInvites).ForEach(func(k, v []byte) error {
			inv, err := decodeInvite(btoi(k), v)
			if err == nil && !now.Before(inv.ExpiresAt) {
				invites = append(invites, inv)
			}
			return err
		})
		if err != nil {
			return err
		}
		var resets []*model.PasswordReset
		err = tx.Bucket(bucketResets).ForEach(func(k, v []byte) error {
			var code model.TokenHash
			if len(k) != len(code) {
				return fmt.Errorf("resets: key %x is not a SHA-256", k)
			}
			copy(code[:], k)
			r, err := decodeReset(code, v)
			if err == nil && !now.Before(r.ExpiresAt) {
				resets = append(resets, r)
			}
			return err
		})
		if err != nil {
			return err
		}
		// Deleting while ForEach walks would move its cursor; delete after.
		for _, inv := range invites {
			if err := deleteInvite(tx, inv); err != nil {
				return err
			}
		}
		for _, r := range resets {
			if err := deleteUserReset(tx, r.UserID); err != nil {
				return err
			}
		}
		n = len(invites) + len(resets)
		return nil
	})
	return n, err
}
