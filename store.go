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

// store is the store serve runs on, whichever --db chose: what http/
// declares, what every store does for the chores, whether an account
// can administer (for the startup's log), and closing. What only
// one store offers (a hot backup, limits shared by instances, the gauges
// of metrics.go) is checked for where it is used.
type store interface {
	heraldhttp.Store
	chores.Store
	certStore // HTTPS with --tls-domain: see tls.go
	HasAdministrator(ctx context.Context) (bool, error)
	Close() error
}

// storeName is what the log says the database --db names is: a path, or
// a URL with any password masked.
func storeName(dbPath string) string {
	if pg.IsURL(dbPath) {
		return pg.Redact(dbPath)
	}
	return dbPath
}

// openStore opens the store --db names: PostgreSQL for a postgres:// or
// postgresql:// URL, a bbolt file for anything else.
func openStore(ctx context.Context, cfg *config, cpus int, logger *slog.Logger, set *metrics.Set) (store, error) {
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
	return db, nil
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
func openPostgres(ctx context.Context, cfg *config, logger *slog.Logger, set *metrics.Set) (store, error) {
	opts := pg.Options{Logger: logger, PoolSize: cfg.dbPool, Timeout: cfg.dbTimeout}
	if set != nil {
		commitTime := set.NewHistogram("herald_db_commit_duration_seconds")
		opts.OnCommit = func(took time.Duration, writes int) { commitTime.Update(took.Seconds()) }
	}
	db, err := pg.Open(ctx, cfg.dbPath, opts)
	if err != nil {
		return nil, err
	}
	return db, nil
}
