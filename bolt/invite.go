package bolt

import (
	"context"
	"encoding/binary"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// Invitations: while registration needs one, a registration takes one use
// of an invitation in its own transaction.

// Invitation record layout: a version byte, the code's hash (32), maxUses
// and uses (4 each), createdAt and expiresAt (8 each), createdBy (8).
const (
	inviteRecordVersion = 1
	inviteRecordLen     = 1 + 32 + 4 + 4 + 8 + 8 + 8
)

func encodeInvite(inv *model.Invite) []byte {
	b := make([]byte, 0, inviteRecordLen)
	b = append(b, inviteRecordVersion)
	b = append(b, inv.CodeHash[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(inv.MaxUses))
	b = binary.BigEndian.AppendUint32(b, uint32(inv.Uses))
	b = binary.BigEndian.AppendUint64(b, uint64(timeToMicros(inv.CreatedAt)))
	b = binary.BigEndian.AppendUint64(b, uint64(timeToMicros(inv.ExpiresAt)))
	return binary.BigEndian.AppendUint64(b, inv.CreatedBy)
}

func decodeInvite(id uint64, b []byte) (*model.Invite, error) {
	if len(b) != inviteRecordLen || b[0] != inviteRecordVersion {
		return nil, fmt.Errorf("decode invitation %d: bad record", id)
	}
	inv := &model.Invite{ID: id}
	copy(inv.CodeHash[:], b[1:33])
	inv.MaxUses = int(binary.BigEndian.Uint32(b[33:]))
	inv.Uses = int(binary.BigEndian.Uint32(b[37:]))
	inv.CreatedAt = microsToTime(int64(binary.BigEndian.Uint64(b[41:])))
	inv.ExpiresAt = microsToTime(int64(binary.BigEndian.Uint64(b[49:])))
	inv.CreatedBy = binary.BigEndian.Uint64(b[57:])
	return inv, nil
}

// useInvite takes one use of the invitation whose code hashes to code,
// inside the registration's transaction. Errors: model.InviteRefused for
// one that is unknown, used up, revoked or expired.
func (db *DB) useInvite(tx *bbolt.Tx, code model.TokenHash) error {
	id := tx.Bucket(bucketInviteCodes).Get(code[:])
	if id == nil {
		return model.InviteRefused()
	}
	invites := tx.Bucket(bucketInvites)
	inv, err := decodeInvite(btoi(id), invites.Get(id))
	if err != nil {
		return err
	}
	if !inv.Usable(db.clock()) {
		return model.InviteRefused()
	}
	inv.Uses++
	return invites.Put(id, encodeInvite(inv))
}

// CreateInvite stores inv, whose MaxUses, ExpiresAt and CodeHash are set,
// and sets its ID, Uses, CreatedAt and CreatedBy. Errors:
// model.ErrForbidden, model.ErrInvalid, model.ErrConflict for a code
// already in use.
func (db *DB) CreateInvite(_ context.Context, by model.Caller, inv *model.Invite) error {
	now := db.clock()
	if err := inv.Validate(now); err != nil {
		return err
	}
	stored := *inv
	err := db.writes.update(func(tx *bbolt.Tx) error {
		actor, err := db.admin(tx, by)
		if err != nil {
			return err
		}
		codes, invites := tx.Bucket(bucketInviteCodes), tx.Bucket(bucketInvites)
		if codes.Get(inv.CodeHash[:]) != nil {
			return model.InviteCodeAlreadyIssued()
		}
		id, err := invites.NextSequence()
		if err != nil {
			return err
		}
		stored.ID, stored.Uses, stored.CreatedAt, stored.CreatedBy = id, 0, now, 0
		if actor != nil {
			stored.CreatedBy = actor.ID
		}
		if err := invites.Put(itob(id), encodeInvite(&stored)); err != nil {
			return err
		}
		if err := codes.Put(stored.CodeHash[:], itob(id)); err != nil {
			return err
		}
		return db.appendAudit(tx, actor, &model.AuditEntry{Action: model.AuditCreateInvite, InviteID: id})
	})
	if err != nil {
		return err
	}
	*inv = stored
	return nil
}

// Invites lists the invitations, newest first, expired ones until the
// sweep removes them. Errors: model.ErrForbidden.
func (db *DB) Invites(_ context.Context, by model.Caller) ([]*model.Invite, error) {
	var out []*model.Invite
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		if _, err := db.admin(tx, by); err != nil {
			return err
		}
		c := tx.Bucket(bucketInvites).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			inv, err := decodeInvite(btoi(k), v)
			if err != nil {
				return err
			}
			out = append(out, inv)
		}
		return nil
	})
	return out, err
}

// RevokeInvite deletes invitation id. Errors: model.ErrForbidden,
// model.ErrNotFound.
func (db *DB) RevokeInvite(_ context.Context, by model.Caller, id uint64) error {
	return db.writes.update(func(tx *bbolt.Tx) error {
		actor, err := db.admin(tx, by)
		if err != nil {
			return err
		}
		invites := tx.Bucket(bucketInvites)
		b := invites.Get(itob(id))
		if b == nil {
			return model.InviteNotFound(id)
		}
		inv, err := decodeInvite(id, b)
		if err != nil {
			return err
		}
		if err := deleteInvite(tx, inv); err != nil {
			return err
		}
		return db.appendAudit(tx, actor, &model.AuditEntry{Action: model.AuditRevokeInvite, InviteID: id})
	})
}

func deleteInvite(tx *bbolt.Tx, inv *model.Invite) error {
	if err := tx.Bucket(bucketInviteCodes).Delete(inv.CodeHash[:]); err != nil {
		return err
	}
	return tx.Bucket(bucketInvites).Delete(itob(inv.ID))
}
