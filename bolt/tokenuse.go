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

// Chores says how often Maintain does what.
type Chores struct {
	Every      time.Duration // how often token uses are written
	SweepEvery time.Duration // how often Sweep runs and interrupted purges go on
	// Sweep, when set, runs the service's sweeps (expired tokens, codes
	// and messages, the logs' trimming) as of now, the store's clock.
	Sweep func(ctx context.Context, now time.Time)
}

// Maintain runs the store's background chores until ctx ends. Each runs in
// small transactions, so writers barely notice it. Errors are reported to
// report and do not stop the loop.
func (db *DB) Maintain(ctx context.Context, chores Chores, report func(chore string, err error)) {
	tick := time.NewTicker(chores.Every)
	defer tick.Stop()
	lastSweep := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := db.FlushTokenUses(ctx); err != nil {
			report("recording token use", err)
		}
		if time.Since(lastSweep) >= chores.SweepEvery {
			lastSweep = time.Now()
			if chores.Sweep != nil {
				chores.Sweep(ctx, db.clock())
			}
			// A removal of messages cut short by a full disk goes on once
			// there is room, without waiting for a restart.
			if err := db.ResumePurges(ctx); err != nil && ctx.Err() == nil {
				report("removing messages an account's deletion or an administrator asked to remove", err)
			}
		}
	}
}
