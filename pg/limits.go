package pg

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/auth"
)

// Shared limits. The guessing limits and the write limit count in the
// database, so N instances behind a load balancer allow what one would,
// not N times as much. Each key is one row holding GCRA's single number,
// the time its bucket is full again plus one interval; a bucket's spends
// are one statement that takes the row's lock, so two instances spending
// at once are counted one after the other. Rows whose bucket is full again say
// nothing a missing row would not, and the leader sweeps them.

// Limiter counts events per key against a rate, in the database: an
// auth.Spender.
type Limiter struct {
	db           *DB
	name         string
	every, slack time.Duration
}

// Limiter returns the shared limiter called name, allowing rate per key.
// Instances that give the same name the same rate share its counts.
func (db *DB) Limiter(name string, rate auth.Rate) auth.Spender {
	burst := max(rate.Burst, 1)
	return &Limiter{db: db, name: name, every: rate.Every, slack: rate.Every * time.Duration(burst-1)}
}

// spendSQL takes up to $6 events from a key's bucket, as many as it
// has: $1 the limiter, $2 the key's hash, $3 now, $4 the interval and $5
// the slack in microseconds. By GCRA, from base, the later of the
// bucket's time and now, the j-th event (from 0) passes while base + j
// intervals is at most the slack ahead of now. It answers how many
// passed and the bucket's time after them; no row when the key's row
// appeared in another transaction after this one looked (then again,
// seeing it). An existing row is locked first, so what is written is
// computed from what it held.
const spendSQL = `WITH old AS (
	SELECT tat FROM limits WHERE name = $1 AND key = $2 FOR UPDATE
), b AS (
	SELECT greatest(coalesce((SELECT tat FROM old), $3::timestamptz), $3::timestamptz) AS base
), p AS (
	SELECT base, greatest(0, least($6::bigint,
		floor(($5::bigint - round(extract(epoch FROM base - $3::timestamptz) * 1000000))::numeric / $4::bigint) + 1))::bigint AS passes
	FROM b
), up AS (
	INSERT INTO limits AS l (name, key, tat)
	SELECT $1, $2, p.base + p.passes * $4::bigint * interval '1 microsecond' FROM p WHERE p.passes > 0
	ON CONFLICT (name, key) DO UPDATE SET tat = excluded.tat WHERE EXISTS (SELECT 1 FROM old)
	RETURNING tat
)
SELECT p.passes, coalesce((SELECT tat FROM up), (SELECT tat FROM old))
FROM p WHERE p.passes = 0 OR EXISTS (SELECT 1 FROM up)`

// Spends are sent together: every write spends from the write limit before
// it is made, and a spend sent on its own is a round trip and a commit of
// its own for each one, as much of PostgreSQL's time as the create it lets
// through
// (docs/performance.md, "PostgreSQL: the shared limit's spends sent together").
// A batch's spends on one key are one statement, which takes as many events
// as the bucket has for them (one statement a spend, the row updated again
// and again in one transaction, left most of the cost), and a batch is one
// pipeline, so one transaction and one commit.

// spendOp is one Spend waiting for its batch.
type spendOp struct {
	ctx  context.Context
	l    *Limiter
	hash [sha256.Size]byte
	now  time.Time
	// The answer: whether it passed, the bucket's time after its batch,
	// the now the batch counted from.
	ok      bool
	tat, at time.Time
	err     error
	done    chan struct{}
}

// sameBucket reports whether a and b spend from one bucket at one rate.
func sameBucket(a, b *spendOp) bool {
	return a.l.name == b.l.name && a.hash == b.hash && a.l.every == b.l.every && a.l.slack == b.l.slack
}

// sendSpends answers a batch of spends. Spends on one bucket go as one
// statement, sent as reads are (sendReadBatch: one pipeline, each alone
// when it fails), so one transaction and one commit a batch; the
// statements go in the order of the rows they lock (limit name, then key
// hash), so two batches on the same keys, this instance's or another's,
// never wait for each other in a circle. A bucket's events go to its
// spends in the order they came.
func (db *DB) sendSpends(batch []*spendOp) {
	live := batch[:0:0]
	for _, op := range batch {
		if op.err = op.ctx.Err(); op.err != nil {
			close(op.done) // its caller has gone: nothing to spend
			continue
		}
		live = append(live, op)
	}
	slices.SortStableFunc(live, func(a, b *spendOp) int {
		if c := strings.Compare(a.l.name, b.l.name); c != 0 {
			return c
		}
		return bytes.Compare(a.hash[:], b.hash[:])
	})
	var (
		buckets    [][]*spendOp
		statements []*readOp
	)
	for start := 0; start < len(live); {
		end := start + 1
		for end < len(live) && sameBucket(live[start], live[end]) {
			end++
		}
		buckets = append(buckets, live[start:end])
		statements = append(statements, db.spendBucket(live[start:end]))
		start = end
	}
	db.sendReadBatch(statements)
	for i, st := range statements {
		for _, op := range buckets[i] {
			// The statement's error, also when it never ran (the store
			// closing) or its read panicked.
			op.err = st.err
			close(op.done)
		}
	}
}

// spendBucket is the statement of a bucket's spends, setting each one's
// answer when it is read (sendSpends hands them its error). Its context
// is the store's: the spends' callers may leave, and the bucket is
// counted for those that stay.
func (db *DB) spendBucket(ops []*spendOp) *readOp {
	now := ops[0].now
	for _, op := range ops[1:] {
		if op.now.After(now) {
			now = op.now
		}
	}
	l := ops[0].l
	return &readOp{ctx: db.life, done: make(chan struct{}),
		queue: func(b *pgx.Batch) {
			b.Queue(spendSQL, l.name, ops[0].hash[:], now, l.every.Microseconds(), l.slack.Microseconds(), len(ops))
		},
		read: func(br pgx.BatchResults) error {
			var (
				passes int64
				tat    time.Time
			)
			if err := br.QueryRow().Scan(&passes, &tat); err != nil {
				return err
			}
			for i, op := range ops {
				op.ok, op.tat, op.at = int64(i) < passes, tat, now
			}
			return nil
		},
	}
}

// Spend takes one event from key's bucket when it has one; when it has
// none it records nothing and reports how long until one is back. When
// the database cannot be reached, or does not answer within the store's
// deadline of a call, the event passes, and the log says so: a limiter
// must not lock everyone out.
func (l *Limiter) Spend(ctx context.Context, key string) (bool, time.Duration) {
	if l.every <= 0 {
		return true, 0
	}
	hash := l.hash(key)
	bounded, cancel := context.WithTimeout(ctx, l.db.timeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		op := &spendOp{ctx: bounded, l: l, hash: hash, now: l.db.limitsClock(), done: make(chan struct{})}
		err := errClosed
		if l.db.spends.add(op) {
			select {
			case <-op.done:
				err = op.err
			case <-bounded.Done():
				err = bounded.Err()
			}
		}
		switch {
		case err == nil && op.ok:
			return true, 0
		case err == nil:
			return false, op.tat.Sub(op.at) - l.slack
		case errors.Is(err, pgx.ErrNoRows) && attempt == 1:
			// Another instance made the key's row between this
			// statement's look and its insert: again, seeing it.
			continue
		case ctx.Err() != nil:
			return false, l.every
		}
		l.db.log.Warn("a shared limit could not be counted; the event passes", "limit", l.name, "err", err)
		return true, 0
	}
}

// Refund gives back one event taken from key's bucket.
func (l *Limiter) Refund(ctx context.Context, key string) {
	if l.every <= 0 {
		return
	}
	hash := l.hash(key)
	bounded, cancel := context.WithTimeout(ctx, l.db.timeout)
	defer cancel()
	_, err := l.db.pool.Exec(bounded, `UPDATE limits SET tat = tat - $3::bigint * interval '1 microsecond' WHERE name = $1 AND key = $2`,
		l.name, hash[:], l.every.Microseconds())
	if err != nil && ctx.Err() == nil {
		l.db.log.Warn("a shared limit could not be refunded", "limit", l.name, "err", err)
	}
}

// limitsClock is the time spends count from: this instance's clock, but
// never earlier than a reading it already spent by, so a clock stepping
// back cannot lengthen a penalty, as with the limits kept in memory
// (auth.Limiter).
func (db *DB) limitsClock() time.Time {
	now := db.clock().UnixMicro()
	for {
		last := db.limitsLast.Load()
		if now <= last {
			return time.UnixMicro(last).UTC()
		}
		if db.limitsLast.CompareAndSwap(last, now) {
			return time.UnixMicro(now).UTC()
		}
	}
}

// hash is what the table keeps of a key: e-mails and addresses are not
// written to the database for being limited.
func (l *Limiter) hash(key string) [sha256.Size]byte {
	return sha256.Sum256([]byte(l.name + "\x00" + key))
}

// SweepLimits deletes the rows of buckets that are full again, and
// returns how many.
func (db *DB) SweepLimits(ctx context.Context) (int, error) {
	// A bucket is full again once its time is at most one interval
	// ahead; the interval is the limiter's, so the rows wait until their
	// time has passed, which is never too early.
	tag, err := db.pool.Exec(ctx, `DELETE FROM limits WHERE tat < $1`, db.clock())
	if err != nil {
		return 0, err
	}
	return rowsAffected(tag), nil
}
