// Package pg is Herald's PostgreSQL store: the types of package model kept
// in a PostgreSQL database that any number of Herald instances share as
// one service. Every write and the change-log entries it implies happen in
// one transaction; change numbers are dense and in commit order (see
// changes.go); search uses Herald's own word terms, never PostgreSQL's
// text-search parser (see search.go); and the chores that must run once
// for the service, not once per instance, run on whichever instance holds
// the leader's lock (see leader.go).
package pg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"herald/model"
)

// IsURL reports whether s names a PostgreSQL database rather than a file:
// a postgres:// or postgresql:// URL, as pgx reads them.
func IsURL(s string) bool {
	lower := strings.ToLower(s)
	return strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://")
}

// Redact returns a URL fit for a log line: the password, if any, replaced.
func Redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "a PostgreSQL URL"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// errAmbiguousURL refuses a URL whose user name or password holds a
// character that ends its part of the URL. Read as written, part of the
// password would become the host or the database, and the error that
// follows would print it, so the refusal names no part of the URL.
var errAmbiguousURL = errors.New("the PostgreSQL URL cannot be read as intended: " +
	"a password or user name holding @ / # ? : or % must have it percent-encoded " +
	"(%40 %2F %23 %3F %3A %25), or give the password in PGPASSWORD or ~/.pgpass")

// checkUnambiguous refuses a postgres:// URL in which a user name or
// password was written with a character that ends its part: more than
// one @ before the query, an @ in the path, or a # anywhere (no
// PostgreSQL URL has a fragment). A keyword string ("host=...
// password=...") is left to pgx.
func checkUnambiguous(s string) error {
	if !IsURL(s) {
		return nil
	}
	rest := s[strings.Index(s, "://")+len("://"):]
	beforeQuery, _, _ := strings.Cut(rest, "?")
	_, path, _ := strings.Cut(beforeQuery, "/")
	if strings.Count(beforeQuery, "@") > 1 || strings.Contains(path, "@") || strings.Contains(rest, "#") {
		return errAmbiguousURL
	}
	return nil
}

// DefaultPoolSize is the pool's size when neither Options.PoolSize nor the
// URL's pool_max_conns says: four connections per CPU, at least eight. A
// write spends most of its time waiting for the server's commit, so more
// connections than CPUs keep the CPUs busy; many more only queue inside
// the server.
func DefaultPoolSize() int { return max(8, 4*runtime.NumCPU()) }

// Options tune Open. The zero value is usable.
type Options struct {
	// PoolSize is the most connections the instance opens; zero means the
	// URL's pool_max_conns, else DefaultPoolSize.
	PoolSize int
	// Now is the clock; nil means time.Now. Tests pass a fixed clock.
	Now func() time.Time
	// Logger reports schema upgrades and leadership; nil discards.
	Logger *slog.Logger
	// PollEvery is how often the instance reads the change log's head
	// whatever notifications say, so a notification lost costs at most
	// this much delay; zero means DefaultPollEvery.
	PollEvery time.Duration
	// TermStatsEvery is how often the instance reads PostgreSQL's
	// statistics of the search terms again, which choose how searches
	// with words are planned (termstats.go); zero means
	// DefaultTermStatsEvery.
	TermStatsEvery time.Duration
	// OnCommit, when set, is told about every write transaction that
	// committed changes: how long its commit took and how many writes it
	// carried.
	OnCommit func(took time.Duration, writes int)
	// ConnectTimeout bounds making a connection, the server's greeting
	// and the login included; zero means the URL's connect_timeout (or
	// PGCONNECT_TIMEOUT), else DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Timeout bounds the database work of each call a request makes:
	// waiting for a connection, its statements, a write's retries, a
	// create's wait in the queue; zero means DefaultTimeout. A call out
	// of time is refused as the database not answering, or, for a write
	// whose commit was sent, with its outcome unknown (fault.go).
	Timeout time.Duration
}

// DefaultConnectTimeout bounds a connection attempt when nothing else
// does. Without a bound, a server whose packets are dropped rather than
// refused (a machine gone, a firewall) holds each attempt for the
// kernel's TCP timeout, about two minutes: Herald's start, and every
// request waiting for a new connection.
const DefaultConnectTimeout = 10 * time.Second

// DefaultPollEvery bounds the delay a lost notification can cause.
const DefaultPollEvery = time.Second

// DB is an open Herald database on PostgreSQL. It is safe for concurrent
// use, and any number of DBs, in any number of processes, may share one
// database.
type DB struct {
	pool     *pgxpool.Pool
	now      func() time.Time
	log      *slog.Logger
	onCommit func(took time.Duration, writes int)
	uses     model.TokenUses
	feed     feed
	lead     leader
	creates  batches[*createOp]
	// posts are the creates that answer or mention someone (people.go).
	posts batches[*createOp]
	reads batches[*readOp]
	// searches sends searches with words that fill a page early together,
	// apart from reads so that no short read waits behind a search.
	searches batches[*readOp]
	// spends sends the shared limits' spends together (limits.go).
	spends batches[*spendOp]
	// wordSearches holds a token for each search with words sent alone:
	// with the batches of searches, at most half the pool's connections,
	// so searches, however many clients send them, leave connections for
	// everything else.
	wordSearches chan struct{}
	// writeTurns holds a token for each write transaction (tx.go): with
	// the committer of creates, at most half the pool's connections, so
	// writes waiting on a lock, however many, leave connections for
	// reads and health checks. writesWaiting counts those waiting for a
	// turn.
	writeTurns    chan struct{}
	writesWaiting atomic.Int32
	// timeout bounds each call's database work (Options.Timeout).
	timeout time.Duration
	// owners is the addresses of the messages' owners this instance has
	// read (owners.go).
	owners ownerEmails
	// terms is what PostgreSQL's statistics say of the search terms, nil
	// without statistics (termstats.go).
	terms atomic.Pointer[termStats]
	// limitsLast is the latest reading of the clock the shared limits
	// spent by, in microseconds since 1970 (limits.go).
	limitsLast atomic.Int64
	// noSpace is the refusal of the last write PostgreSQL failed for a
	// full disk, until a write succeeds.
	noSpace atomic.Pointer[error]

	stop chan struct{} // closed by Close: the listener and poller end
	// life ends with Close: reads sent together stop waiting for
	// PostgreSQL then.
	life    context.Context
	endLife context.CancelFunc
	workers sync.WaitGroup
	closed  sync.Once
}

// Open connects to the database at url (a pgx URL or keyword string),
// brings its schema up to date (once, under a lock, however many instances
// start together) and starts following the change log.
func Open(ctx context.Context, url string, opts Options) (*DB, error) {
	if err := checkUnambiguous(url); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("the PostgreSQL URL is not valid: %w", err) // pgx masks any password
	}
	if opts.PoolSize > 0 {
		cfg.MaxConns = int32(opts.PoolSize)
	} else if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = int32(DefaultPoolSize())
	}
	if opts.ConnectTimeout > 0 {
		cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	} else if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	// A statement whose context ends is cancelled by PostgreSQL, at pgx's
	// request: it stops, rolled back (a write waiting on a lock holds its
	// locks no longer), and the connection stays usable. pgx's default
	// closes the connection at once instead, and PostgreSQL, which does
	// not look at a connection while a statement waits, would keep the
	// backend and its locks until the wait ended. A server that answers
	// nothing has its connection closed after cancelGrace.
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelGrace}
	}
	params := cfg.ConnConfig.RuntimeParams
	if params["application_name"] == "" {
		params["application_name"] = "herald"
	}
	// Search relies on a UNION ALL being read branch by branch, in order,
	// and stopping at its limit: a parallel plan would read branches at
	// once (see search.go).
	params["max_parallel_workers_per_gather"] = "0"
	// Herald's statements are short; compiling one (JIT) can take longer
	// than running it many times over when the planner misjudges a fresh
	// table's size
	// (docs/performance.md, "PostgreSQL: statements planned once").
	if params["jit"] == "" {
		params["jit"] = "off"
	}
	// Herald's statements are few and always the same; planning them anew
	// for every execution costs more than running them
	// (docs/performance.md, "PostgreSQL: statements planned once"). They
	// are planned once per connection; a search with words, whose best plan
	// depends on its words, is written in the form that suits them, chosen
	// from PostgreSQL's statistics, and planned each time only without them
	// (see search.go).
	if params["plan_cache_mode"] == "" {
		params["plan_cache_mode"] = "force_generic_plan"
	}
	params["timezone"] = "UTC"
	db := &DB{now: opts.Now, log: opts.Logger, onCommit: opts.OnCommit, timeout: opts.Timeout, stop: make(chan struct{})}
	if db.timeout <= 0 {
		db.timeout = DefaultTimeout
	}
	db.life, db.endLife = context.WithCancel(context.Background())
	db.creates = batches[*createOp]{limit: 1, size: maxCreateBatch, run: db.commitBatch, workers: &db.workers}
	db.posts = batches[*createOp]{limit: 1, size: maxPostBatch, run: func(b []*createOp) { db.runBatch(b, db.commitPosts) },
		workers: &db.workers}
	db.reads = batches[*readOp]{limit: readConcurrency(), size: maxReadBatch, run: db.sendReadBatch, workers: &db.workers}
	db.searches = batches[*readOp]{limit: readConcurrency(), size: maxReadBatch, run: db.sendReadBatch, workers: &db.workers}
	db.spends = batches[*spendOp]{limit: 1, size: maxReadBatch, run: db.sendSpends, workers: &db.workers}
	if db.now == nil {
		db.now = time.Now
	}
	if db.log == nil {
		db.log = slog.New(slog.DiscardHandler)
	}
	db.wordSearches = make(chan struct{}, max(1, int(cfg.MaxConns)/2-db.searches.limit))
	db.writeTurns = make(chan struct{}, max(1, int(cfg.MaxConns)/2-db.creates.limit))
	db.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	if err := db.prepare(ctx); err != nil {
		db.pool.Close()
		return nil, err
	}
	poll := opts.PollEvery
	if poll <= 0 {
		poll = DefaultPollEvery
	}
	if err := db.startFeed(ctx, poll); err != nil {
		db.pool.Close()
		return nil, err
	}
	statsEvery := opts.TermStatsEvery
	if statsEvery <= 0 {
		statsEvery = DefaultTermStatsEvery
	}
	db.workers.Add(1)
	go db.followTermStats(statsEvery)
	return db, nil
}

// ownConnConfig is the pool's connection settings for a connection of the
// store's own, the listener's or the leader's, which waits on purpose
// (for a notification, or holding a lock) until the store closes: the end
// of its context closes it at once, pgx's default, rather than asking
// PostgreSQL to cancel a statement, which an idle connection has none of.
func (db *DB) ownConnConfig() *pgx.ConnConfig {
	cfg := db.pool.Config().ConnConfig.Copy()
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	return cfg
}

// prepare checks the server and applies the schema.
func (db *DB) prepare(ctx context.Context) error {
	var encoding string
	if err := db.pool.QueryRow(ctx, "SHOW server_encoding").Scan(&encoding); err != nil {
		return fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	// Messages and e-mails are Unicode, and the search compares Herald's
	// own UTF-8 terms byte for byte.
	if encoding != "UTF8" {
		return fmt.Errorf("the PostgreSQL database's encoding is %s; Herald needs UTF8 (CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0)", encoding)
	}
	return db.migrate(ctx)
}

// Close stops following the change log, lets the creates queued commit,
// writes the noted token uses and closes every connection. It always
// returns nil; the uses it could not write are only logged, being advisory.
func (db *DB) Close() error {
	db.closed.Do(func() {
		close(db.stop)
		db.creates.close()
		db.posts.close()
		db.reads.close()
		db.searches.close()
		db.spends.close()
		db.endLife()
		db.workers.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := db.FlushTokenUses(ctx); err != nil {
			db.log.Warn("recording token use at close", "err", err)
		}
		db.pool.Close()
	})
	return nil
}

// Ping reports whether the database can still serve a read.
func (db *DB) Ping(ctx context.Context) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	var one int
	return db.pool.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// WritesFailing returns the refusal of the last write PostgreSQL failed
// for a full disk (kind model.ErrNoSpace), until a message's create
// succeeds, on this instance.
func (db *DB) WritesFailing(context.Context) error {
	if err := db.noSpace.Load(); err != nil {
		return *err
	}
	return nil
}

// writeOutcome is a write's error as the API should see it: PostgreSQL's
// disk_full becomes model.ErrNoSpace, and is remembered for
// WritesFailing.
func (db *DB) writeOutcome(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "53100" {
		refused := model.DatabaseFull()
		db.noSpace.Store(&refused)
		return refused
	}
	return err
}

// createOutcome is writeOutcome for a message's create, the write that
// needs new room: only its success ends a spell of writes failing for a
// full disk. The smaller writes (a login's token, an edit) often fit in
// pages the tables already have, so their success says nothing of the
// disk: while creates are refused for lack of room, writes are failing,
// whatever smaller write last succeeded.
func (db *DB) createOutcome(err error) error {
	if err == nil {
		if db.noSpace.Load() != nil {
			db.noSpace.Store(nil)
		}
		return nil
	}
	return db.writeOutcome(err)
}

// Now is the store's clock, by which the chores judge what has expired.
func (db *DB) Now() time.Time { return db.clock() }

// clock returns the current time at the precision the API shows and
// PostgreSQL keeps, in UTC.
func (db *DB) clock() time.Time {
	return db.now().UTC().Truncate(time.Microsecond)
}

// Counts is the number of records of each kind.
type Counts struct {
	Users, Tokens, Messages int
}

// Counts reports how many accounts, tokens and messages the database
// holds; tests use it to prove a refused request stored nothing, and
// herald migrate to compare a copy with its source.
func (db *DB) Counts(ctx context.Context) (Counts, error) {
	var c Counts
	err := db.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM tokens), (SELECT count(*) FROM messages)`).
		Scan(&c.Users, &c.Tokens, &c.Messages)
	return c, err
}

// rowsAffected is a tag's count as an int.
func rowsAffected(tag interface{ RowsAffected() int64 }) int { return int(tag.RowsAffected()) }

// collectRows is pgx.CollectRows for a row type scanned by scan.
func collectRows[T any](rows pgx.Rows, scan func(pgx.Row) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
