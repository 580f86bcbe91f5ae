package bolt

import (
	"context"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// retainChunk is how many old messages one retention transaction deletes:
// small, so writers queue behind it for a moment at most.
const retainChunk = 500

// DeleteMessagesBefore deletes the messages created before cutoff, with
// their index entries, retainChunk per transaction, oldest first, and
// returns how many it deleted. It walks the time index, so it reads only
// what it deletes.
func (db *DB) DeleteMessagesBefore(ctx context.Context, cutoff time.Time) (int, error) {
	deleted := 0
	for {
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
		n := 0
		err := db.writes.update(func(tx *bbolt.Tx) error {
			n = 0
			var old []*Message
			owners := newOwnerEmails(tx)
			c := tx.Bucket(bucketMsgsByTime).Cursor()
			limit := timeKey(cutoff)
			for k, _ := c.First(); k != nil && len(old) < retainChunk && string(k[:8]) < string(limit); k, _ = c.Next() {
				m, err := messageRecord(tx, btoi(k[8:]))
				if err != nil {
					return err
				}
				owners.join(m) // a deleted owner's purge may still be running; its change has no e-mail
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
