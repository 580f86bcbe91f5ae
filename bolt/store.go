// Package bolt is Herald's default store: the types of package model kept
// in a single bbolt file. Every write and the index entries it implies
// happen in one transaction, so the indexes can never disagree with the
// records they point at.
package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"herald/model"
)

// Bucket names. A few flat buckets with composite keys keep scans simple
// (Seek + prefix) and avoid the page overhead of many nested buckets.
var (
	bucketUsers        = []byte("users")          // userID → user record
	bucketUsersByEmail = []byte("users_by_email") // lower(email) → userID
	bucketTokens       = []byte("tokens")         // sha256(token) → token record
	bucketTokensByUser = []byte("tokens_by_user") // userID‖sha256(token) → nil
	bucketMessages     = []byte("messages")       // messageID → message record
	bucketPostings     = []byte("postings")       // term‖0x00‖first messageID → a block of IDs, for messages up to meta/terms_merged
	bucketMeta         = []byte("meta")           // layout version, upgrade progress
	bucketDeleting     = []byte("deleting")       // userID → e-mail: deleted accounts whose messages are being removed
	bucketChanges      = []byte("changes")        // sequence → change record: the log live streams tail
	// messageID → sequence of the one change of the message that holds
	// its content, its newest (see changes.go)
	bucketChangesByMessage = []byte("changes_by_message")
	bucketAdmins           = []byte("admins")       // userID → nil: the accounts that hold model.RoleAdmin
	bucketInvites          = []byte("invites")      // inviteID → invitation record
	bucketInviteCodes      = []byte("invite_codes") // sha256(code) → inviteID
	bucketResets           = []byte("resets")       // sha256(code) → password-reset record
	bucketUserResets       = []byte("user_resets")  // userID → sha256(code): an account's one outstanding reset
	bucketAudit            = []byte("audit")        // sequence → audit entry
	bucketPurging          = []byte("purging")      // userID → highest message ID: accounts whose messages an administrator is removing
	bucketSettings         = []byte("settings")     // setting's name → its value: see settings.go

	// model.EmailSkeleton(email)‖0x00‖userID → nil: see skeletonKey
	bucketUsersBySkeleton = []byte("users_by_skeleton")
	// handle → userID: every account's, from layout 9 on
	bucketUsersByHandle = []byte("users_by_handle")

	allBuckets = [][]byte{
		bucketUsers, bucketUsersByEmail, bucketUsersBySkeleton, bucketUsersByHandle, bucketAdmins,
		bucketTokens, bucketTokensByUser,
		bucketMessages, bucketPostings, bucketTermsTail,
		bucketMeta, bucketDeleting, bucketPurging, bucketChanges, bucketChangesByMessage,
		bucketInvites, bucketInviteCodes, bucketResets, bucketUserResets, bucketAudit,
		bucketIdempotency, bucketIdempotencyByTime, bucketCerts, bucketSettings,
		bucketReplies, bucketReplyCounts, bucketNotifications, bucketNotified, bucketNotificationMarks,
		bucketPush, bucketPushSubs, bucketPushSubsByUser, bucketPushSubsByEndpoint, bucketPushPending,
	}

	// Buckets whose keys only rise, so new keys land at the very end, and
	// buckets mostly grown that way: see fillGrowingBuckets.
	appendOnlyBuckets   = [][]byte{bucketChanges, bucketAudit}
	mostlyAppendBuckets = [][]byte{bucketMessages, bucketTermsTail, bucketPostings, bucketChangesByMessage}
)

// fillGrowingBuckets has the buckets that grow at their end fill the
// pages they split. bbolt splits a leaf at half a page by default, which
// suits keys that land anywhere; but a leaf left behind the end of a
// bucket is never inserted into again, so every page of an append-only
// bucket would stay half empty for good: twice the pages written per
// commit, twice the file, twice the pages a read walks.
//
// Append-only buckets (sequence numbers only rise; nothing is rewritten)
// fill pages completely. Messages and tail records are appended too, but an
// edit rewrites one in place, and the postings bucket takes a merge's
// blocks at the end of each word's range: these leave a tenth of each page
// free, so an edit or the next merge finds room before it splits a page:
// fuller leaves than bbolt's halves leave, with thousands of merged words
// (docs/performance.md, "bbolt: full pages for growing buckets").
func fillGrowingBuckets(tx *bbolt.Tx) {
	for _, name := range appendOnlyBuckets {
		if b := tx.Bucket(name); b != nil {
			b.FillPercent = 1.0
		}
	}
	for _, name := range mostlyAppendBuckets {
		if b := tx.Bucket(name); b != nil {
			b.FillPercent = 0.9
		}
	}
}

// DefaultLockTimeout is how long Open waits for another process to release
// the file lock before giving up; failing fast beats hanging forever.
const DefaultLockTimeout = time.Second

// DefaultInitialMmapSize is the address space mapped at open: 1 GiB, or
// 256 MiB where pointers are 32 bits (a Raspberry Pi on armv7 has only a
// few GiB of address space in all). bbolt remaps when the file outgrows its
// mapping, and a remap waits for every open read transaction; mapping
// generously up front (address space, not memory) makes that rare.
const DefaultInitialMmapSize = 256 << 20 << (2 * (^uint(0) >> 63))

// Options tune Open. The zero value is usable.
type Options struct {
	// LockTimeout bounds the wait for the file lock; zero means DefaultLockTimeout.
	LockTimeout time.Duration
	// InitialMmapSize is passed to bbolt; zero means DefaultInitialMmapSize.
	InitialMmapSize int
	// Now is the clock; nil means time.Now. Tests pass a fixed clock.
	Now func() time.Time
	// Logger reports layout upgrades; nil discards.
	Logger *slog.Logger
	// OnCommit, when set, is told about every write transaction the group
	// committer commits: how long it took (the fsync included) and how
	// many writes it carried. It runs on the committer; keep it quick.
	OnCommit func(took time.Duration, writes int)
	// TailMergePostings is how many postings the search index's tail
	// gathers before they are merged into the postings bucket (see indextail.go);
	// zero means DefaultTailMergePostings. Tests make it small.
	TailMergePostings int
	// LongSearches is how many searches may be past their first read
	// transaction at once (see DB.search); zero means half the CPUs the
	// process may use, at least one.
	LongSearches int
	// LegacyAdmins are the e-mails a release that named administrators
	// by configuration (--admins) was started with. The upgrade to layout
	// 7 stores the role with the accounts these e-mails have then; on a
	// database already upgraded, or a new one, Open refuses them with
	// ErrLegacyAdmins, so the setting never grants anything again.
	LegacyAdmins []string
	// KeepLayout refuses, with ErrNeedsUpgrade, a database written in an
	// older layout rather than upgrade it: for tools that must not make an
	// upgrade that a start of the server should make with its settings.
	KeepLayout bool
	// WriteTimeout bounds a client's write's wait for its commit (see
	// committer.overdue); zero means DefaultWriteTimeout.
	WriteTimeout time.Duration

	// mergeChunk, for tests, overrides mergeChunkPostings. It is an
	// option because the merger starts in Open: a merge a crash cut short
	// is finished at once, so a value set on the DB after Open would race
	// with it.
	mergeChunk int
}

// DB is an open Herald database. It is safe for concurrent use.
type DB struct {
	bolt   *bbolt.DB
	now    func() time.Time
	log    *slog.Logger
	writes *committer
	uses   model.TokenUses
	feed   changeFeed
	tail   *tailIndex
	merge  merger
	turns  *searchTurns
	// noSpace holds the error of the last commit that failed for lack of
	// storage, until a commit succeeds; nil while writes succeed.
	noSpace atomic.Pointer[error]
	// broken is set, for good, when a commit that failed turned out to be
	// on disk (see checkRolledBack).
	broken atomic.Pointer[error]
}

// LongSearchLoad reports how many costly searches (those past their first
// read transaction) are running and how many wait for their turn.
func (db *DB) LongSearchLoad() (running, waiting int) {
	return len(db.turns.slots), int(db.turns.waiting.Load())
}

// FileSize is the size of the database file in bytes; 0 when it cannot
// be read.
func (db *DB) FileSize() int64 {
	fi, err := os.Stat(db.bolt.Path())
	if err != nil {
		return 0
	}
	return fi.Size()
}

// ErrLocked is returned by Open when another process holds the database.
var ErrLocked = errors.New("database is in use by another process")

// openBolt opens the bbolt file at path and words its failures the way the
// server and the tools report them: ErrLocked when another process holds
// it, ErrNotHerald when it is not a bbolt file, both with the path.
func openBolt(path string, opts *bbolt.Options) (*bbolt.DB, error) {
	bdb, err := bbolt.Open(path, 0o600, opts)
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, &os.PathError{Op: "open", Path: path, Err: ErrLocked}
	case err != nil && notBbolt(err):
		return nil, &os.PathError{Op: "open", Path: path, Err: ErrNotHerald}
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return bdb, nil
}

// heraldFile tells a Herald database (users bucket present) from a new,
// empty bbolt file (fresh) and from someone else's file (ErrNotHerald),
// which must not be read as ours or get our buckets.
func heraldFile(tx *bbolt.Tx) (fresh bool, err error) {
	if tx.Bucket(bucketUsers) != nil {
		return false, nil
	}
	if k, _ := tx.Cursor().First(); k != nil {
		return false, ErrNotHerald
	}
	return true, nil
}

// notBbolt tells an error bbolt gives for a file that is not its own (bad
// magic, version or checksum, too short to hold its pages) from one the
// operating system gives (missing directory, permission), which carries a
// path.
func notBbolt(err error) bool {
	var pathErr *os.PathError
	return !errors.As(err, &pathErr) && !errors.Is(err, bolterrors.ErrTimeout)
}

// ErrLegacyAdmins is returned by Open for Options.LegacyAdmins on a
// database that is not being upgraded from a release that read them.
var ErrLegacyAdmins = errors.New("administrators named by configuration are no longer read: they are stored with their accounts")

// ErrNeedsUpgrade is returned by Open, with Options.KeepLayout, for a
// database an older Herald wrote.
var ErrNeedsUpgrade = errors.New("the database was written by an older Herald and needs upgrading")

// ErrNotHerald is returned by Open for a file that is not a Herald
// database: not a bbolt file at all, or someone else's bbolt file, which
// Open must not add its buckets to.
var ErrNotHerald = errors.New("not a Herald database")

// Open opens (creating if needed) the database at path and makes sure every
// bucket exists.
func Open(path string, opts Options) (*DB, error) {
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	mmapSize := opts.InitialMmapSize
	if mmapSize <= 0 {
		mmapSize = DefaultInitialMmapSize
	}
	longSearches := opts.LongSearches
	if longSearches <= 0 {
		longSearches = max(1, runtime.GOMAXPROCS(0)/2)
	}
	db := &DB{now: opts.Now, log: opts.Logger, turns: newSearchTurns(longSearches)}
	if db.now == nil {
		db.now = time.Now
	}
	if db.log == nil {
		db.log = slog.New(slog.DiscardHandler)
	}
	bdb, err := openBolt(path, &bbolt.Options{Timeout: timeout, InitialMmapSize: mmapSize, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType})
	if err != nil {
		return nil, err
	}
	db.bolt = bdb
	if err := db.prepareLayout(opts.LegacyAdmins, opts.KeepLayout); err != nil {
		_ = bdb.Close()
		if errors.Is(err, ErrNotHerald) || errors.Is(err, ErrLegacyAdmins) || errors.Is(err, ErrNeedsUpgrade) {
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := db.openFeed(); err != nil {
		_ = bdb.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	mergeAt := opts.TailMergePostings
	if mergeAt <= 0 {
		mergeAt = DefaultTailMergePostings
	}
	db.tail = newTailIndex(mergeAt)
	if err := db.loadTail(); err != nil {
		_ = bdb.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.writes = newCommitter(db)
	db.writes.onCommit = opts.OnCommit
	if db.writes.timeout = opts.WriteTimeout; db.writes.timeout <= 0 {
		db.writes.timeout = DefaultWriteTimeout
	}
	db.merge.stop, db.merge.done = make(chan struct{}), make(chan struct{})
	db.merge.chunk = opts.mergeChunk
	go db.runMerger()
	if err := db.resumePurges(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

// Close waits for queued writes to commit, then releases the file.
// Transactions in flight finish first.
func (db *DB) Close() error {
	if _, err := db.FlushTokenUses(context.Background()); err != nil {
		db.log.Warn("recording token use at close", "err", err)
	}
	// The merger first: its chunks are writes. What it had not finished,
	// the next Open's merger goes on with.
	db.merge.halt.Do(func() { close(db.merge.stop) })
	<-db.merge.done
	db.writes.close()
	return db.bolt.Close()
}

// Ping reports whether the database can still serve: a read transaction,
// and writes unless a failed commit left it unable to (checkRolledBack).
func (db *DB) Ping(context.Context) error {
	if err := db.broken.Load(); err != nil {
		return *err
	}
	return db.bolt.View(func(*bbolt.Tx) error { return nil })
}

// WritesFailing returns the refusal of the last commit that failed for
// lack of storage (kind model.ErrNoSpace), until a commit succeeds.
func (db *DB) WritesFailing(context.Context) error {
	if err := db.noSpace.Load(); err != nil {
		return *err
	}
	return nil
}

// Check runs bbolt's consistency check over every page and reports what it
// finds. It runs as a write, because bbolt compares the pages a transaction
// reaches with the live freelist, which a concurrent commit (the search
// index's merger, say) changes under a read transaction. The channel is
// drained to the end: bbolt's checker goroutine would block forever if we
// stopped reading after the first error.
func (db *DB) Check() error {
	return db.writes.upkeep(func(tx *bbolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
}

// Now is the store's clock, by which the chores judge what has expired.
func (db *DB) Now() time.Time { return db.clock() }

// clock returns the current time at the precision the API shows, in UTC, so a
// timestamp a client reads back compares equal to the stored one.
func (db *DB) clock() time.Time {
	return db.now().UTC().Truncate(time.Microsecond)
}

// itob encodes an ID as 8 big-endian bytes so byte order is numeric order.
func itob(id uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, id)
	return b
}

func btoi(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

// idReader reads records keyed by itob(id) from one bucket through one
// cursor. It is Bucket.Get without Get's fresh cursor per call, whose
// allocations showed in the profiles of searches that read a record per
// message. Valid for the transaction its cursor came from.
type idReader struct {
	c   *bbolt.Cursor
	key [8]byte
}

func newIDReader(b *bbolt.Bucket) idReader { return idReader{c: b.Cursor()} }

// get returns record id, or nil when there is none.
func (r *idReader) get(id uint64) []byte {
	binary.BigEndian.PutUint64(r.key[:], id)
	if k, v := r.c.Seek(r.key[:]); bytes.Equal(k, r.key[:]) {
		return v
	}
	return nil
}

// lastEntry is Cursor.Last for write transactions. A key deleted in a
// write transaction leaves its page in place, possibly empty, until the
// commit; when every page of a bucket is empty, bbolt v1.5.0's Last never
// returns (its skip of empty pages and Prev's return to First call each
// other). First, which skips empty pages forward, finds such a bucket
// empty; with one key anywhere, Last's skip finds the last.
func lastEntry(c *bbolt.Cursor) ([]byte, []byte) {
	if k, _ := c.First(); k == nil {
		return nil, nil
	}
	return c.Last()
}

// lastBelow places c, of a read transaction, on the last key below
// itob(id), or on the last key of all for id 0, and returns that entry.
func lastBelow(c *bbolt.Cursor, id uint64) ([]byte, []byte) {
	if id == 0 {
		return c.Last()
	}
	if k, _ := c.Seek(itob(id)); k == nil {
		return c.Last()
	}
	return c.Prev()
}

// compositeKey joins an 8-byte ID prefix with a suffix, the shape of every
// secondary index key here.
func compositeKey(prefix uint64, suffix []byte) []byte {
	k := make([]byte, 8, 8+len(suffix))
	binary.BigEndian.PutUint64(k, prefix)
	return append(k, suffix...)
}

// timeToMicros and microsToTime store instants as Unix microseconds: the API
// precision, and 8 fixed bytes in a record.
func timeToMicros(t time.Time) int64 { return t.UnixMicro() }

func microsToTime(us int64) time.Time { return time.UnixMicro(us).UTC() }

// Counts is the number of records of each kind.
type Counts struct {
	Users, Tokens, Messages int
}

// Counts reports how many records each primary bucket holds; tests use it to
// prove a refused request stored nothing, and metrics will report it.
func (db *DB) Counts() (Counts, error) {
	var c Counts
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		c.Users = tx.Bucket(bucketUsers).Stats().KeyN
		c.Tokens = tx.Bucket(bucketTokens).Stats().KeyN
		c.Messages = tx.Bucket(bucketMessages).Stats().KeyN
		return nil
	})
	return c, err
}
