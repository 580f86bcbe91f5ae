package bolt

import (
	"context"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// FlushTokenUses writes the noted token uses to their records, skipping
// tokens revoked since. It returns how many records it updated.
func (db *DB) FlushTokenUses(context.Context) (int, error) {
	pending := db.uses.Take()
	if len(pending) == 0 {
		return 0, nil
	}
	n := 0
	err := db.writes.upkeep(func(tx *bbolt.Tx) error {
		n = 0
		tokens := tx.Bucket(bucketTokens)
		seen := make(map[uint64]time.Time) // each account's latest use
		for hash, at := range pending {
			b := tokens.Get(hash[:])
			if b == nil {
				continue
			}
			t, err := decodeToken(hash, b)
			if err != nil {
				return err
			}
			if !at.After(t.LastUsedAt) {
				continue
			}
			t.LastUsedAt = at
			if err := tokens.Put(hash[:], encodeToken(t)); err != nil {
				return err
			}
			if at.After(seen[t.UserID]) {
				seen[t.UserID] = at
			}
			n++
		}
		// An account is last seen when one of its tokens was last used.
		for id, at := range seen {
			u, err := userByID(tx, id)
			if err != nil {
				return err
			}
			if at.After(u.LastSeenAt) {
				u.LastSeenAt = at
				if err := db.putUser(tx, u); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return n, err
}
