package bolt

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// The audit log: every administrative act, appended in the transaction of
// the act itself, so an act is in the log if and only if it happened. It
// is trimmed from the front by age and count, as the change log is.

// Audit record layout: a version byte, at (8), the action (1-byte length),
// the actor's ID (8) and e-mail (2-byte length), the target account's ID
// (8) and e-mail (2-byte length), message ID (8), invitation ID (8) and
// count (4). Version 2 adds the settings a settings-update changed: their
// number (1), then each name (1-byte length) and value (1-byte length), in
// name order. Version 1 records, of layouts up to 7, are read as they are.
const (
	auditRecordVersion   = 2
	auditRecordVersionV1 = 1
)

func encodeAudit(e *model.AuditEntry) []byte {
	b := make([]byte, 0, 1+8+1+len(e.Action)+8+2+len(e.ActorEmail)+8+2+len(e.UserEmail)+8+8+4+1)
	b = append(b, auditRecordVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(timeToMicros(e.At)))
	b = append(b, byte(len(e.Action)))
	b = append(b, e.Action...)
	b = binary.BigEndian.AppendUint64(b, e.ActorID)
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.ActorEmail)))
	b = append(b, e.ActorEmail...)
	b = binary.BigEndian.AppendUint64(b, e.UserID)
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.UserEmail)))
	b = append(b, e.UserEmail...)
	b = binary.BigEndian.AppendUint64(b, e.MessageID)
	b = binary.BigEndian.AppendUint64(b, e.InviteID)
	b = binary.BigEndian.AppendUint32(b, uint32(e.Count))
	// model.ValidateSettingsStored bounds names and values far below 255
	// bytes, and their number to the few settings there are.
	b = append(b, byte(len(e.Settings)))
	for _, name := range slices.Sorted(maps.Keys(e.Settings)) {
		b = append(b, byte(len(name)))
		b = append(b, name...)
		b = append(b, byte(len(e.Settings[name])))
		b = append(b, e.Settings[name]...)
	}
	return b
}

func decodeAudit(id uint64, b []byte) (*model.AuditEntry, error) {
	r := recordReader{b: b}
	version := r.byte()
	if version != auditRecordVersion && version != auditRecordVersionV1 {
		return nil, fmt.Errorf("decode audit entry %d: unknown record version", id)
	}
	e := &model.AuditEntry{ID: id, At: microsToTime(int64(r.uint64()))}
	e.Action = model.AuditAction(r.bytes(int(r.byte())))
	e.ActorID = r.uint64()
	e.ActorEmail = string(r.bytes(int(r.uint16())))
	e.UserID = r.uint64()
	e.UserEmail = string(r.bytes(int(r.uint16())))
	e.MessageID = r.uint64()
	e.InviteID = r.uint64()
	e.Count = int(binary.BigEndian.Uint32(r.bytes(4)))
	if version == auditRecordVersion {
		if n := int(r.byte()); n > 0 {
			e.Settings = make(model.Settings, n)
			for range n {
				name := string(r.bytes(int(r.byte())))
				e.Settings[name] = string(r.bytes(int(r.byte())))
			}
		}
	}
	if r.short || len(r.b) != 0 {
		return nil, fmt.Errorf("decode audit entry %d: bad record", id)
	}
	return e, nil
}

// appendAudit gives e the log's next ID, the time and its actor (nil: the
// server's machine), and stores it inside tx, the act's transaction.
func (db *DB) appendAudit(tx *bbolt.Tx, actor *model.User, e *model.AuditEntry) error {
	log := tx.Bucket(bucketAudit)
	id, err := log.NextSequence()
	if err != nil {
		return err
	}
	e.ID, e.At = id, db.clock()
	if actor != nil {
		e.ActorID, e.ActorEmail = actor.ID, actor.Email
	}
	return log.Put(itob(id), encodeAudit(e))
}

// AuditLog pages through the audit log, newest first. Errors:
// model.ErrForbidden for a caller who is not an administrator.
func (db *DB) AuditLog(_ context.Context, by model.Caller, q model.AuditQuery) (*model.AuditPage, error) {
	limit := q.PageLimit()
	page := &model.AuditPage{}
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		if _, err := db.admin(tx, by); err != nil {
			return err
		}
		c := tx.Bucket(bucketAudit).Cursor()
		for k, v := lastBelow(c, q.BeforeID); k != nil; k, v = c.Prev() {
			if len(page.Entries) == limit {
				page.NextBeforeID = page.Entries[limit-1].ID
				return nil
			}
			e, err := decodeAudit(btoi(k), v)
			if err != nil {
				return err
			}
			page.Entries = append(page.Entries, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// RecordBackup writes to the audit log that the caller downloads a
// backup: before the copy is taken, so the copy holds the entry.
func (db *DB) RecordBackup(_ context.Context, by model.Caller) error {
	return db.writes.update(func(tx *bbolt.Tx) error {
		actor, err := db.admin(tx, by)
		if err != nil {
			return err
		}
		return db.appendAudit(tx, actor, &model.AuditEntry{Action: model.AuditDownloadBackup})
	})
}

// TrimAudit removes audit entries older than keepFor, and the oldest
// beyond the newest keepMax, trimChunk per transaction, and returns how
// many it removed. A zero keepFor or keepMax leaves that bound off.
func (db *DB) TrimAudit(ctx context.Context, keepFor time.Duration, keepMax int) (int, error) {
	return db.trimFront(ctx, bucketAudit, keepFor, keepMax, func(v []byte) int64 {
		if len(v) < 9 {
			return math.MaxInt64 // malformed: left for the check to report
		}
		return int64(binary.BigEndian.Uint64(v[1:]))
	}, nil, nil)
}
