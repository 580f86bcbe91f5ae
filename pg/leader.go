package pg

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// The leader. Some background work is the service's, not each
// instance's: sweeping expired tokens, invitations, password resets and
// full limit buckets, deleting messages past --retain, trimming the change
// and audit logs. Done by every instance it would only be done N times
// over, racing itself. It is done by the leader: the instance holding a
// session-level advisory lock on a connection it keeps for that alone.
// When that instance stops, or its connection breaks, PostgreSQL releases
// the lock, and another instance, asking at each round of its chores
// (package chores, which runs them), takes it.
//
// Writing the token uses each instance has noted in memory is every
// instance's own chore.

// leader is this instance's hold on the leader's lock, on a connection
// of its own, outside the pool: held from the pool, the lock would take
// one of its connections for as long as the instance leads (all of a
// pool of one).
type leader struct {
	conn    *pgx.Conn // the connection holding the lock; nil when not leading
	leading atomic.Bool
}

// Leading reports whether this instance holds the leader's lock.
func (db *DB) Leading() bool { return db.lead.leading.Load() }

// Leads reports whether this instance leads the service's chores, once it
// has checked that a lead held is still held and, when it holds none,
// tried to take it. The chores loop calls it when it starts and at each
// of its ticks, from one goroutine.
func (db *DB) Leads(ctx context.Context) bool {
	db.keepLead(ctx)
	return db.Leading()
}

// keepLead checks that a lead held is still held (its connection
// answers), and tries to take the lead when not holding it.
func (db *DB) keepLead(ctx context.Context) {
	l := &db.lead
	if l.conn != nil {
		checkCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var held bool
		err := l.conn.QueryRow(checkCtx, `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 2
			AND pid = pg_backend_pid() AND granted)`, lockSpace, lockLeader).Scan(&held)
		cancel()
		if err == nil && held {
			return
		}
		if ctx.Err() != nil {
			return
		}
		db.log.Warn("lost the lead of the service's chores; another instance takes it", "err", err)
		l.leading.Store(false)
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = l.conn.Close(closeCtx)
		cancel()
		l.conn = nil
	}
	conn, err := pgx.ConnectConfig(ctx, leadConnConfig(db.ownConnConfig()))
	if err != nil {
		return
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, lockSpace, lockLeader).Scan(&got); err != nil || !got {
		_ = conn.Close(context.Background())
		return
	}
	l.conn = conn
	l.leading.Store(true)
	db.log.Info("leading the service's chores (sweeps, retention, trimming the change and audit logs)")
}

// leadConnConfig is the pool's connection settings with PostgreSQL's TCP
// keepalives made short, but for those the database URL sets itself. The
// lead is its connection's session lock: when this instance's machine
// vanishes without closing it (its power lost, the network cut),
// PostgreSQL holds the lock until it finds the connection dead, by the
// system's defaults two hours later, and no instance runs the chores
// until then. With these it probes an idle connection after 30 s, and
// gives up after three probes unanswered 10 s apart. A Unix socket
// ignores them: it cannot go silent that way.
func leadConnConfig(pool *pgx.ConnConfig) *pgx.ConnConfig {
	cfg := pool.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	for _, kv := range [][2]string{{"tcp_keepalives_idle", "30"}, {"tcp_keepalives_interval", "10"}, {"tcp_keepalives_count", "3"}} {
		if _, set := cfg.RuntimeParams[kv[0]]; !set {
			cfg.RuntimeParams[kv[0]] = kv[1]
		}
	}
	return cfg
}

// Resign gives up the lead, if held, so another instance takes it at
// once rather than when this one's connection closes. The chores loop
// calls it when it stops, from the goroutine that calls Leads.
func (db *DB) Resign() {
	l := &db.lead
	if l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Closing the connection releases the lock too; unlocking first
	// says so at once rather than when PostgreSQL notices the close.
	_, _ = l.conn.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, lockSpace, lockLeader)
	_ = l.conn.Close(ctx)
	l.conn = nil
	l.leading.Store(false)
}
