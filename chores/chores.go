// Package chores is Herald's background work declared once: which chores
// there are, how often they run, what they keep, and the loop that runs
// them. It is a package of its own so that package main, which runs the
// loop over the store it serves, and storetest, which holds every store to
// the interfaces below, share one declaration (neither a store nor a test
// suite can import package main). A store only says what it can do, by
// the interfaces it implements, and, where several instances share its
// data, whether this instance leads; it never calls back.
//
// The chores:
//   - every FlushEvery, on every instance: the token uses it noted in
//     memory are written to their tokens (model.TokenUses);
//   - every SweepEvery, on the instance that leads: expired tokens,
//     invitations, password resets and idempotency records are swept,
//     messages past Retain deleted, the change log and the audit log
//     trimmed to what they keep; removals of messages a full disk cut
//     short go on (bbolt), and the guessing and write limits' buckets that
//     are full again are swept (PostgreSQL).
package chores

import (
	"context"
	"time"
)

// How often the chores run, unless told otherwise.
const (
	// FlushEvery is how often token uses are written: a crash loses at
	// most the uses noted since.
	FlushEvery = 30 * time.Second
	// SweepEvery is how often the sweeps run.
	SweepEvery = time.Minute
)

// Config says how often the chores run and what they keep. A zero bound
// keeps everything by that measure.
type Config struct {
	FlushEvery time.Duration // how often token uses are written
	SweepEvery time.Duration // how often the leader sweeps
	// Retain is how long messages are kept; 0 keeps them all.
	Retain time.Duration
	// ChangesKeepFor and ChangesKeepMax bound the change log by age and
	// by count.
	ChangesKeepFor time.Duration
	ChangesKeepMax int
	// AuditKeepFor and AuditKeepMax bound the audit log by age and by
	// count.
	AuditKeepFor time.Duration
	AuditKeepMax int
	// NotificationsKeepFor is how long notifications are kept; 0 keeps
	// them (each account's newest model.MaxNotifications) for good.
	NotificationsKeepFor time.Duration
}

// Store is what every store does for the chores.
type Store interface {
	TokenUseWriter
	Sweeper
	// Now is the store's clock: what has expired, and what is past
	// Retain, is judged by it.
	Now() time.Time
}

// TokenUseWriter writes the token uses this instance noted in memory.
type TokenUseWriter interface {
	// FlushTokenUses writes the noted uses to their tokens, skipping
	// tokens revoked since, and returns how many it wrote.
	FlushTokenUses(ctx context.Context) (int, error)
}

// Sweeper deletes what has expired and trims what is kept to its bounds.
// Each returns how many records it deleted.
type Sweeper interface {
	SweepExpiredTokens(ctx context.Context) (int, error)
	DeleteMessagesBefore(ctx context.Context, cutoff time.Time) (int, error)
	TrimChanges(ctx context.Context, keepFor time.Duration, keepMax int) (int, error)
	TrimAudit(ctx context.Context, keepFor time.Duration, keepMax int) (int, error)
	// SweepExpiredCodes sweeps invitations and password resets.
	SweepExpiredCodes(ctx context.Context) (int, error)
	SweepIdempotencyKeys(ctx context.Context) (int, error)
	TrimNotifications(ctx context.Context, keepFor time.Duration) (int, error)
}

// PurgeResumer is offered by a store whose removals of many messages (an
// account's deletion, an administrator's removal of an account's
// messages) a full disk can cut short: the leader's sweeps go on with
// them once there is room, without waiting for a restart.
type PurgeResumer interface {
	ResumePurges(ctx context.Context) error
}

// LimitSweeper is offered by a store that keeps the guessing and write
// limits for every instance: the leader's sweeps delete the buckets that
// are full again, which say nothing a missing one would not.
type LimitSweeper interface {
	SweepLimits(ctx context.Context) (int, error)
}

// Leader is offered by a store that several instances share: the
// service's chores are done by one of them, the leader, not N times over,
// racing itself. A store that is not a Leader has its data to itself (a
// bbolt file is locked by the one process that opens it) and always
// leads. Run calls both methods from its one goroutine.
type Leader interface {
	// Leads reports whether this instance leads, taking the lead when
	// no instance holds it.
	Leads(ctx context.Context) bool
	// Resign gives the lead up, if held, so another instance takes it
	// at once.
	Resign()
}

// Run runs the chores on s until ctx ends: this instance's token uses
// every c.FlushEvery and, while this instance leads, the sweeps at the
// first of those ticks at least c.SweepEvery after the last sweeps. A
// chore that fails is reported to report, unless ctx has ended, and the
// others still run. A Leader is asked for the lead at once and at every
// tick, and gives it up when Run returns.
func Run(ctx context.Context, s Store, c Config, report func(chore string, err error)) {
	tick := time.NewTicker(c.FlushEvery)
	defer tick.Stop()
	leader, shared := s.(Leader)
	if shared {
		defer leader.Resign()
		leader.Leads(ctx)
	}
	lastSweep := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := s.FlushTokenUses(ctx); err != nil && ctx.Err() == nil {
			report("recording token use", err)
		}
		// Asked just before the sweeps: a lead lost since the last tick
		// is not acted on.
		if (shared && !leader.Leads(ctx)) || time.Since(lastSweep) < c.SweepEvery {
			continue
		}
		lastSweep = time.Now()
		c.sweep(ctx, s, s.Now(), report)
		if p, ok := s.(PurgeResumer); ok {
			if err := p.ResumePurges(ctx); err != nil && ctx.Err() == nil {
				report("removing messages an account's deletion or an administrator asked to remove", err)
			}
		}
		if l, ok := s.(LimitSweeper); ok {
			if _, err := l.SweepLimits(ctx); err != nil && ctx.Err() == nil {
				report("sweeping the shared limits", err)
			}
		}
	}
}

// sweep runs the sweeps on s as of now, the store's clock: what has
// expired goes, and what c keeps stays. A sweep that fails is reported
// and the others still run.
func (c Config) sweep(ctx context.Context, s Sweeper, now time.Time, report func(chore string, err error)) {
	run := func(chore string, do func() (int, error)) {
		if _, err := do(); err != nil && ctx.Err() == nil {
			report(chore, err)
		}
	}
	run("sweeping expired tokens", func() (int, error) { return s.SweepExpiredTokens(ctx) })
	if c.Retain > 0 {
		run("deleting messages past --retain", func() (int, error) { return s.DeleteMessagesBefore(ctx, now.Add(-c.Retain)) })
	}
	if c.ChangesKeepFor > 0 || c.ChangesKeepMax > 0 {
		run("trimming the change log", func() (int, error) { return s.TrimChanges(ctx, c.ChangesKeepFor, c.ChangesKeepMax) })
	}
	if c.AuditKeepFor > 0 || c.AuditKeepMax > 0 {
		run("trimming the audit log", func() (int, error) { return s.TrimAudit(ctx, c.AuditKeepFor, c.AuditKeepMax) })
	}
	run("sweeping expired invitations and password resets", func() (int, error) { return s.SweepExpiredCodes(ctx) })
	run("sweeping idempotency keys past their 24 hours", func() (int, error) { return s.SweepIdempotencyKeys(ctx) })
	if c.NotificationsKeepFor > 0 {
		run("trimming notifications past --notifications-keep", func() (int, error) { return s.TrimNotifications(ctx, c.NotificationsKeepFor) })
	}
}
