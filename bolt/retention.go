package bolt

import (
	"context"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// retainChunk is how many old messages one retention transaction deletes:
// small, so writers queue behind it for a moment at most.
const retainChunk = 500

// DeleteMessagesBefore deletes the messages created before cutoff, with
// their index entries, retainChunk per transaction, oldest first, and
// returns how many it deleted. Creation times never fall as IDs rise, so
// it walks the messages from the first and reads only what it deletes,
// and one more.
func (db *DB) DeleteMessagesBefore(ctx context.Context, cutoff time.Time) (int, error) {
	deleted := 0
	for {
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
		n := 0
		err := db.writes.upkeep(func(tx *bbolt.Tx) error {
			n = 0
			var old []*model.Message
			owners := newOwnerEmails(tx)
			c := tx.Bucket(bucketMessages).Cursor()
			limit := model.BoundMicros(cutoff)
			for k, v := c.First(); k != nil && len(old) < retainChunk; k, v = c.Next() {
				m, err := decodeMessage(btoi(k), v)
				if err != nil {
					return err
				}
				if timeToMicros(m.CreatedAt) >= limit {
					break
				}
				if !owners.join(m) {
					// The owner's account is deleted and its purge still
					// running: the e-mail it kept for the purge's changes
					// goes in this one too, so streams filtering by that
					// owner hear of the deletion.
					m.OwnerEmail = deletedAccountEmail(tx, m.OwnerID)
				}
				old = append(old, m)
			}
			// Deleting while the cursor walks would move it; delete after.
			for _, m := range old {
				if err := db.removeMessage(tx, m); err != nil {
					return err
				}
			}
			n = len(old)
			return nil
		})
		if err != nil {
			return deleted, err
		}
		deleted += n
		if n < retainChunk {
			return deleted, nil
		}
	}
}
