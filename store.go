package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"herald/auth"
	"herald/bolt"
	heraldhttp "herald/http"
	"herald/pg"
)

// servedStore is the store serve runs on, whichever --db chose, with what
// serve needs besides the interfaces of http/: its chores, its metrics,
// how to name it in the log, and how to close it.
type servedStore struct {
	heraldhttp.Store
	// name is what the log says the database is: a path, or a URL with
	// any password masked.
	name string
	// maintain runs the store's background chores until ctx ends.
	maintain func(ctx context.Context, chores storeChores, report func(chore string, err error))
	// gauges adds the store's own metrics to set.
	gauges func(set *metrics.Set)
	// limits, when set, keeps the guessing and write limits in the store,
	// shared by every instance on it.
	limits func(name string, rate auth.Rate) heraldhttp.Limiter
	close  func() error
}

// storeChores says how often the chores run and what they keep.
type storeChores struct {
	every, sweepEvery time.Duration
	retain            time.Duration
	changesKeepFor    time.Duration
	changesKeepMax    int
	auditKeepFor      time.Duration
	auditKeepMax      int
}

// choresFor says what the chores keep by cfg's flags: token uses are
// written every 30 s, and the sweeps run every minute.
func choresFor(cfg *config) storeChores {
	return storeChores{every: 30 * time.Second, sweepEvery: time.Minute, retain: cfg.retain,
		changesKeepFor: cfg.changesKeepFor, changesKeepMax: cfg.changesKeepMax,
		auditKeepFor: cfg.auditKeepFor, auditKeepMax: cfg.auditKeepMax}
}

// sweeper is what a sweep asks of a store.
type sweeper interface {
	SweepExpiredTokens(ctx context.Context) (int, error)
	DeleteMessagesBefore(ctx context.Context, cutoff time.Time) (int, error)
	TrimChanges(ctx context.Context, keepFor time.Duration, keepMax int) (int, error)
	TrimAudit(ctx context.Context, keepFor time.Duration, keepMax int) (int, error)
	SweepExpiredCodes(ctx context.Context) (int, error)
	SweepIdempotencyKeys(ctx context.Context) (int, error)
}

// sweep runs the service's sweeps on s as of now, the store's clock: what
// has expired goes, and what the flags keep stays. Every store runs it
// every sweepEvery, PostgreSQL's on one instance at a time. A chore that
// fails is reported and the others still run.
func (c storeChores) sweep(ctx context.Context, s sweeper, now time.Time, report func(chore string, err error)) {
	run := func(chore string, do func() (int, error)) {
		if _, err := do(); err != nil && ctx.Err() == nil {
			report(chore, err)
		}
	}
	run("sweeping expired tokens", func() (int, error) { return s.SweepExpiredTokens(ctx) })
	if c.retain > 0 {
		run("deleting messages past --retain", func() (int, error) { return s.DeleteMessagesBefore(ctx, now.Add(-c.retain)) })
	}
	if c.changesKeepFor > 0 || c.changesKeepMax > 0 {
		run("trimming the change log", func() (int, error) { return s.TrimChanges(ctx, c.changesKeepFor, c.changesKeepMax) })
	}
	if c.auditKeepFor > 0 || c.auditKeepMax > 0 {
		run("trimming the audit log", func() (int, error) { return s.TrimAudit(ctx, c.auditKeepFor, c.auditKeepMax) })
	}
	run("sweeping expired invitations and password resets", func() (int, error) { return s.SweepExpiredCodes(ctx) })
	run("sweeping idempotency keys past their 24 hours", func() (int, error) { return s.SweepIdempotencyKeys(ctx) })
}

// openStore opens the store --db names: PostgreSQL for a postgres:// or
// postgresql:// URL, a bbolt file for anything else.
func openStore(ctx context.Context, cfg *config, cpus int, logger *slog.Logger, set *metrics.Set) (*servedStore, error) {
	if pg.IsURL(cfg.dbPath) {
		if len(cfg.legacyAdmins()) > 0 {
			// Only a bbolt file of an older layout had administrators
			// named by --admins to carry over.
			return nil, errLegacyAdmins
		}
		return openPostgres(ctx, cfg, logger, set)
	}
	opts := storeOptions(cpus, logger, set)
	opts.WriteTimeout = cfg.dbTimeout
	if opts.LegacyAdmins = cfg.legacyAdmins(); len(opts.LegacyAdmins) > 0 {
		// A new database has no administrators to carry over, and must
		// not be created by a start that fails.
		if _, err := os.Stat(cfg.dbPath); errors.Is(err, os.ErrNotExist) {
			return nil, errLegacyAdmins
		}
	}
	db, err := bolt.Open(cfg.dbPath, opts)
	if err != nil {
		return nil, err
	}
	return &servedStore{
		Store: db,
		name:  cfg.dbPath,
		maintain: func(ctx context.Context, c storeChores, report func(string, error)) {
			db.Maintain(ctx, bolt.Chores{Every: c.every, SweepEvery: c.sweepEvery,
				Sweep: func(ctx context.Context, now time.Time) { c.sweep(ctx, db, now, report) }}, report)
		},
		gauges: func(set *metrics.Set) {
			set.NewGauge("herald_search_costly_running", func() float64 { r, _ := db.LongSearchLoad(); return float64(r) })
			set.NewGauge("herald_search_costly_waiting", func() float64 { _, w := db.LongSearchLoad(); return float64(w) })
			set.NewGauge("herald_db_size_bytes", func() float64 {
				fi, err := os.Stat(cfg.dbPath)
				if err != nil {
					return 0
				}
				return float64(fi.Size())
			})
		},
		close: db.Close,
	}, nil
}

// storeOptions configures the store for a machine of cpus CPUs, its
// commits reported to set when metrics are on (set may be nil).
func storeOptions(cpus int, logger *slog.Logger, set *metrics.Set) bolt.Options {
	// Long searches are limited by CPUs, not by scheduler slots (see
	// setProcs): at most half the machine goes to them.
	opts := bolt.Options{Logger: logger, LongSearches: max(1, cpus/2)}
	if set != nil {
		commitTime := set.NewHistogram("herald_db_commit_duration_seconds")
		commitWrites := set.NewHistogram("herald_db_commit_writes")
		opts.OnCommit = func(took time.Duration, writes int) {
			commitTime.Update(took.Seconds())
			commitWrites.Update(float64(writes))
		}
	}
	return opts
}

// openPostgres opens the PostgreSQL store at the URL --db gives.
func openPostgres(ctx context.Context, cfg *config, logger *slog.Logger, set *metrics.Set) (*servedStore, error) {
	opts := pg.Options{Logger: logger, PoolSize: cfg.dbPool, Timeout: cfg.dbTimeout}
	if set != nil {
		commitTime := set.NewHistogram("herald_db_commit_duration_seconds")
		opts.OnCommit = func(took time.Duration, writes int) { commitTime.Update(took.Seconds()) }
	}
	db, err := pg.Open(ctx, cfg.dbPath, opts)
	if err != nil {
		return nil, err
	}
	return &servedStore{
		Store: db,
		name:  pg.Redact(cfg.dbPath),
		maintain: func(ctx context.Context, c storeChores, report func(string, error)) {
			db.Maintain(ctx, pg.Chores{Every: c.every, SweepEvery: c.sweepEvery,
				Sweep: func(ctx context.Context, now time.Time) { c.sweep(ctx, db, now, report) }}, report)
		},
		limits: func(name string, rate auth.Rate) heraldhttp.Limiter { return db.Limiter(name, rate) },
		gauges: func(set *metrics.Set) {
			set.NewGauge("herald_db_leading_chores", func() float64 {
				if db.Leading() {
					return 1
				}
				return 0
			})
		},
		close: db.Close,
	}, nil
}
