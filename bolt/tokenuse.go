package bolt

import (
	"context"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// FlushTokenUses writes the noted token uses to their records, skipping
// tokens revoked since. It returns how many records it updated.
func (db *DB) FlushTokenUses() (int, error) {
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
	SweepEvery time.Duration // how often expired tokens are swept
	// Retain, when positive, deletes messages older than this every
	// SweepEvery.
	Retain time.Duration
	// ChangesKeepFor and ChangesKeepMax bound the change log, by age and
	// by count, every SweepEvery; zero leaves that bound off.
	ChangesKeepFor time.Duration
	ChangesKeepMax int
	// AuditKeepFor and AuditKeepMax bound the audit log in the same way.
	AuditKeepFor time.Duration
	AuditKeepMax int
}

// Maintain runs the store's background chores until ctx ends. Each runs in
// small transactions, so writers barely notice it. Errors are reported to
// report and do not stop the loop.
func (db *DB) Maintain(ctx context.Context, chores Chores, report func(chore string, err error)) {
	interval, sweepEvery := chores.Every, chores.SweepEvery
	tick := time.NewTicker(interval)
	defer tick.Stop()
	lastSweep := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := db.FlushTokenUses(); err != nil {
			report("recording token use", err)
		}
		if time.Since(lastSweep) >= sweepEvery {
			lastSweep = time.Now()
			if _, err := db.SweepExpiredTokens(ctx); err != nil && ctx.Err() == nil {
				report("sweeping expired tokens", err)
			}
			if chores.Retain > 0 {
				if _, err := db.DeleteMessagesBefore(ctx, db.clock().Add(-chores.Retain)); err != nil && ctx.Err() == nil {
					report("deleting messages past --retain", err)
				}
			}
			if chores.ChangesKeepFor > 0 || chores.ChangesKeepMax > 0 {
				if _, err := db.TrimChanges(ctx, chores.ChangesKeepFor, chores.ChangesKeepMax); err != nil && ctx.Err() == nil {
					report("trimming the change log", err)
				}
			}
			if chores.AuditKeepFor > 0 || chores.AuditKeepMax > 0 {
				if _, err := db.TrimAudit(ctx, chores.AuditKeepFor, chores.AuditKeepMax); err != nil && ctx.Err() == nil {
					report("trimming the audit log", err)
				}
			}
			if _, err := db.SweepExpiredCodes(ctx); err != nil && ctx.Err() == nil {
				report("sweeping expired invitations and password resets", err)
			}
			// A removal of messages cut short by a full disk goes on once
			// there is room, without waiting for a restart.
			if err := db.resumePurges(); err != nil && ctx.Err() == nil {
				report("removing messages an account's deletion or an administrator asked to remove", err)
			}
		}
	}
}
