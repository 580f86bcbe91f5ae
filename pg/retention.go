package pg

import (
	"context"
	"time"
)

// Retention: messages older than the operator keeps are deleted by the
// chores, a chunk at a time, each with its message.deleted change.

// retainChunk is how many old messages one retention transaction deletes:
// small, so the counter's lock is held for a moment at most.
const retainChunk = 500

// DeleteMessagesBefore deletes the messages created before cutoff,
// retainChunk per transaction, oldest first, and returns how many it
// deleted. Streams hear of each.
func (db *DB) DeleteMessagesBefore(ctx context.Context, cutoff time.Time) (int, error) {
	deleted := 0
	for {
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
		var n int
		err := db.write(ctx, func(w *writeTx) error {
			w.purge = &purge{
				where: "m.id IN (SELECT id FROM messages WHERE created_at < $18 ORDER BY created_at, id LIMIT $19)",
				args:  []any{boundTime(cutoff), retainChunk},
			}
			w.purged = &n
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
