package pg

import (
	"context"
	"time"

	"herald/model"
)

// Idempotency keys. A create made with an Idempotency-Key inserts a row
// of idempotency_keys in its own statement, beside the message (createSQL,
// createBatchSQL); a retry's statement finds the row and creates nothing.
//
// Two creates with one key can meet three ways:
//   - in one batch: they never do, since apartByKey sends the later one
//     in a batch of its own after the first's has committed;
//   - in two statements at once, on two instances or two batches: both
//     take the counter row's lock last, so the second waits for the
//     first's commit, but it looked for the key in a snapshot older than
//     that commit. Its insert of the key then violates the primary key,
//     the whole statement is rolled back, and it is run again, when its
//     new snapshot finds the first's row;
//   - with a row past its window that the sweep has not deleted yet: the
//     statement ignores it as a record but its insert collides with it
//     all the same; the dead row is deleted and the create run again.
//
// Rows hold no content, so nothing deletes them with a message; they go
// with their account (the foreign key cascades) and are swept after
// model.IdempotencyWindow.

// foundKey is the record of a key a create's statement found, all NULL
// when it found none.
type foundKey struct {
	fingerprint []byte
	messageID   *int64
	createdAt   *time.Time
}

// replay answers op from the record its statement found, for the
// account owner.
func (f *foundKey) replay(op *createOp, owner *model.User) (*model.Message, error) {
	return f.replayDraft(*op.key, owner, model.Draft{Content: op.content})
}

// replayDraft answers a retry of draft made with key from the record
// found, for the account owner. The caller fills the mentions.
func (f *foundKey) replayDraft(key model.IdempotencyKey, owner *model.User, draft model.Draft) (*model.Message, error) {
	r := &model.IdempotencyRecord{UserID: owner.ID, Key: model.IdempotencyKey{ID: key.ID},
		ResourceID: uint64(*f.messageID), CreatedAt: f.createdAt.UTC()}
	copy(r.Key.Fingerprint[:], f.fingerprint)
	return r.Replay(key, owner, draft)
}

// keyInTheWay reports whether op's statement failed on its key's row:
// one committed since the statement's snapshot, or one past its window.
func keyInTheWay(op *createOp, err error) bool {
	return op.key != nil && uniqueViolation(err, "idempotency_keys_pkey")
}

// dropDeadKey deletes the rows of key past their window, of whichever
// account: they answer no retry any more, and only stand in the way.
func (db *DB) dropDeadKey(ctx context.Context, key *model.IdempotencyKey) error {
	_, err := db.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE key = $1 AND created_at <= $2`,
		key.ID[:], db.clock().Add(-model.IdempotencyWindow))
	return err
}

// apartByKey splits batch into the creates that can share a statement
// and those that must wait for it: every create whose Idempotency-Key an
// earlier create of the batch carries (of any account: keys are
// random, and one more batch costs little). Both keep their order.
func apartByKey(batch []*createOp) (now, later []*createOp) {
	var seen map[[32]byte]bool
	for _, op := range batch {
		if op.key != nil {
			if seen[op.key.ID] {
				later = append(later, op)
				continue
			}
			if seen == nil {
				seen = make(map[[32]byte]bool)
			}
			seen[op.key.ID] = true
		}
		now = append(now, op)
	}
	return now, later
}

// SweepIdempotencyKeys deletes the records past model.IdempotencyWindow,
// sweepChunk per statement, and returns how many.
func (db *DB) SweepIdempotencyKeys(ctx context.Context) (int, error) {
	deleted := 0
	for {
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
		tag, err := db.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE (user_id, key) IN (
			SELECT user_id, key FROM idempotency_keys WHERE created_at <= $1 LIMIT $2)`,
			db.clock().Add(-model.IdempotencyWindow), sweepChunk)
		if err != nil {
			return deleted, err
		}
		n := rowsAffected(tag)
		deleted += n
		if n < sweepChunk {
			return deleted, nil
		}
	}
}
