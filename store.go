package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"herald/bolt"
	"herald/chores"
	heraldhttp "herald/http"
	"herald/pg"
)

// store is what serve asks of the store --db opens: what http/ declares,
// and what every store does for the chores.
type store interface {
	heraldhttp.Store
	chores.Store
}

// servedStore is the store serve runs on, whichever --db chose, with what
// serve needs besides the interfaces of http/ and chores: its metrics,
// how to name it in the log, and how to close it.
type servedStore struct {
	store
	// name is what the log says the database is: a path, or a URL with
	// any password masked.
	name string
	// gauges adds the store's own metrics to set.
	gauges func(set *metrics.Set)
	close  func() error
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
		store: db,
		name:  cfg.dbPath,
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
		store: db,
		name:  pg.Redact(cfg.dbPath),
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
