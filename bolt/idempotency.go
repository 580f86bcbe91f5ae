package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// Idempotency keys. A create made with an Idempotency-Key writes a record
// of it in its own transaction: the account, the key's hash, the
// request's fingerprint, what it made and when. A retry finds the record
// inside its transaction, which the group committer runs after the
// first's, so two requests with one key never both write, in one batch or
// in two. Records hold no content (see model.IdempotencyRecord): nothing
// needs removing from them when a message is edited or deleted. They go
// with their account, and the sweep removes them once they are older than
// model.IdempotencyWindow.
//
//	idempotency          userID‖sha256(key) → record
//	idempotency_by_time  createdAt‖userID‖sha256(key) → nil, for the sweep
var (
	bucketIdempotency       = []byte("idempotency")
	bucketIdempotencyByTime = []byte("idempotency_by_time")
)

// An idempotency record: a version byte, the creation time (Unix
// microseconds), the ID of what was made and the fingerprint.
const (
	idempotencyRecordVersion = 1
	idempotencyRecordLen     = 1 + 8 + 8 + 32
	idempotencyKeyLen        = 8 + 32
)

func idempotencyKey(userID uint64, key *model.IdempotencyKey) []byte {
	return compositeKey(userID, key.ID[:])
}

func encodeIdempotency(r *model.IdempotencyRecord) []byte {
	b := make([]byte, 0, idempotencyRecordLen)
	b = append(b, idempotencyRecordVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(timeToMicros(r.CreatedAt)))
	b = binary.BigEndian.AppendUint64(b, r.ResourceID)
	return append(b, r.Key.Fingerprint[:]...)
}

// decodeIdempotency reads the record stored under k, copying it out of
// the transaction's memory.
func decodeIdempotency(k, v []byte) (*model.IdempotencyRecord, error) {
	if len(k) != idempotencyKeyLen || len(v) != idempotencyRecordLen || v[0] != idempotencyRecordVersion {
		return nil, fmt.Errorf("idempotency: bad record %x", k)
	}
	r := &model.IdempotencyRecord{
		UserID:     btoi(k),
		CreatedAt:  microsToTime(int64(binary.BigEndian.Uint64(v[1:]))),
		ResourceID: binary.BigEndian.Uint64(v[9:]),
	}
	copy(r.Key.ID[:], k[8:])
	copy(r.Key.Fingerprint[:], v[17:])
	return r, nil
}

// idempotencyTimeKey is r's entry in the time index.
func idempotencyTimeKey(r *model.IdempotencyRecord) []byte {
	k := make([]byte, 0, 8+idempotencyKeyLen)
	k = binary.BigEndian.AppendUint64(k, uint64(timeToMicros(r.CreatedAt)))
	k = binary.BigEndian.AppendUint64(k, r.UserID)
	return append(k, r.Key.ID[:]...)
}

// liveIdempotency returns the record of owner's key if one answers
// retries now, nil if none does.
func (db *DB) liveIdempotency(tx *bbolt.Tx, ownerID uint64, key *model.IdempotencyKey) (*model.IdempotencyRecord, error) {
	k := idempotencyKey(ownerID, key)
	v := tx.Bucket(bucketIdempotency).Get(k)
	if v == nil {
		return nil, nil
	}
	r, err := decodeIdempotency(k, v)
	if err != nil || !r.Live(db.clock()) {
		return nil, err
	}
	return r, nil
}

// putIdempotency stores r, replacing a record of the same key that is no
// longer live (and its time index entry).
func putIdempotency(tx *bbolt.Tx, r *model.IdempotencyRecord) error {
	records, byTime := tx.Bucket(bucketIdempotency), tx.Bucket(bucketIdempotencyByTime)
	k := idempotencyKey(r.UserID, &r.Key)
	if v := records.Get(k); v != nil {
		old, err := decodeIdempotency(k, v)
		if err != nil {
			return err
		}
		if err := byTime.Delete(idempotencyTimeKey(old)); err != nil {
			return err
		}
	}
	if err := records.Put(k, encodeIdempotency(r)); err != nil {
		return err
	}
	return byTime.Put(idempotencyTimeKey(r), nil)
}

// deleteIdempotencyOf deletes every record of account userID.
func deleteIdempotencyOf(tx *bbolt.Tx, userID uint64) error {
	records, byTime := tx.Bucket(bucketIdempotency), tx.Bucket(bucketIdempotencyByTime)
	prefix := itob(userID)
	var gone []*model.IdempotencyRecord
	c := records.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		r, err := decodeIdempotency(k, v)
		if err != nil {
			return err
		}
		gone = append(gone, r)
	}
	// Deleting while the cursor walks would move it; delete after.
	for _, r := range gone {
		if err := records.Delete(idempotencyKey(r.UserID, &r.Key)); err != nil {
			return err
		}
		if err := byTime.Delete(idempotencyTimeKey(r)); err != nil {
			return err
		}
	}
	return nil
}

// insertMessageOnce is insertMessage for a create made with key: the
// first answer rebuilt when owner's live record of key says the create
// was made, else the message inserted with the key's record.
func (db *DB) insertMessageOnce(tx *bbolt.Tx, owner *model.User, draft model.Draft, terms []string, key *model.IdempotencyKey) (*model.Message, error) {
	r, err := db.liveIdempotency(tx, owner.ID, key)
	if err != nil {
		return nil, err
	}
	if r != nil {
		m, err := r.Replay(*key, owner, draft)
		if err != nil {
			return nil, err
		}
		m.Mentions = resolveMentions(tx, m.Content, nil)
		return m, nil
	}
	m, err := db.insertMessage(tx, owner, draft, terms)
	if err != nil {
		return nil, err
	}
	return m, putIdempotency(tx, &model.IdempotencyRecord{UserID: owner.ID, Key: *key, ResourceID: m.ID, CreatedAt: m.CreatedAt})
}

// SweepIdempotencyKeys deletes the records no longer live, oldest first,
// sweepChunk per transaction, and returns how many.
func (db *DB) SweepIdempotencyKeys(ctx context.Context) (int, error) {
	deleted := 0
	for {
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
		n, more := 0, false
		err := db.writes.upkeep(func(tx *bbolt.Tx) error {
			n, more = 0, false
			cutoff := timeToMicros(db.clock().Add(-model.IdempotencyWindow))
			records, byTime := tx.Bucket(bucketIdempotency), tx.Bucket(bucketIdempotencyByTime)
			var expired [][]byte
			c := byTime.Cursor()
			for k, _ := c.First(); k != nil && int64(btoi(k)) <= cutoff; k, _ = c.Next() {
				if len(expired) == sweepChunk {
					more = true
					break
				}
				expired = append(expired, bytes.Clone(k))
			}
			for _, k := range expired {
				if err := records.Delete(k[8:]); err != nil {
					return err
				}
				if err := byTime.Delete(k); err != nil {
					return err
				}
			}
			n = len(expired)
			return nil
		})
		if err != nil {
			return deleted, err
		}
		deleted += n
		if !more {
			return deleted, nil
		}
	}
}

// idempotency reports records that do not decode, whose account is
// gone, that name a message ID never given out, or that disagree with the
// time index.
func (c *checker) idempotency() {
	records, byTime := c.tx.Bucket(bucketIdempotency), c.tx.Bucket(bucketIdempotencyByTime)
	users, messages := c.tx.Bucket(bucketUsers), c.tx.Bucket(bucketMessages)
	_ = records.ForEach(func(k, v []byte) error {
		r, err := decodeIdempotency(k, v)
		switch {
		case err != nil:
			c.addf("%v", err)
		case users.Get(itob(r.UserID)) == nil:
			c.addf("idempotency: a record of account %d, which does not exist", r.UserID)
		case r.ResourceID == 0 || r.ResourceID > messages.Sequence():
			c.addf("idempotency: a record of account %d names message %d, never given out", r.UserID, r.ResourceID)
		case byTime.Get(idempotencyTimeKey(r)) == nil:
			c.addf("idempotency: a record of account %d is missing from the time index", r.UserID)
		}
		return nil
	})
	// Every entry of the time index names a record of its time, so the
	// sweep deletes every record it finds there and no other.
	_ = byTime.ForEach(func(k, _ []byte) error {
		if len(k) != 8+idempotencyKeyLen {
			c.addf("idempotency_by_time: key %x is not a time, an account and a key", k)
			return nil
		}
		v := records.Get(k[8:])
		if r, err := decodeIdempotency(k[8:], v); v == nil || err != nil || timeToMicros(r.CreatedAt) != int64(btoi(k)) {
			c.addf("idempotency_by_time: an entry of account %d at %s has no record of that time", btoi(k[8:]),
				microsToTime(int64(btoi(k))).Format(time.RFC3339Nano))
		}
		return nil
	})
}
