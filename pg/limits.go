package pg

import (
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
// the time its bucket is full again plus one interval; a spend is one
// statement that takes the row's lock, so two instances spending at once
// are counted one after the other. Rows whose bucket is full again say
// nothing a missing row would not, and the leader sweeps them.

// Limiter counts events per key against a rate, in the database. It
// satisfies the limiter interface of http/.
type Limiter struct {
	db           *DB
	name         string
	every, slack time.Duration
}

// Limiter returns the shared limiter called name, allowing rate per key.
// Instances that give the same name the same rate share its counts.
func (db *DB) Limiter(name string, rate auth.Rate) *Limiter {
	burst := max(rate.Burst, 1)
	return &Limiter{db: db, name: name, every: rate.Every, slack: rate.Every * time.Duration(burst-1)}
}

// spendSQL takes one event from a key's bucket if it has one: $1 the
// limiter, $2 the key's hash, $3 now, $4 the interval and $5 the slack in
// microseconds. It answers whether the event passed and the bucket's
// time; no row when the row appeared in another transaction meanwhile.
const spendSQL = `WITH up AS (
	INSERT INTO limits AS l (name, key, tat) VALUES ($1, $2, $3::timestamptz + $4::bigint * interval '1 microsecond')
	ON CONFLICT (name, key) DO UPDATE
		SET tat = greatest(l.tat, $3::timestamptz) + $4::bigint * interval '1 microsecond'
		WHERE l.tat - $3::timestamptz <= $5::bigint * interval '1 microsecond'
	RETURNING tat
)
SELECT true, tat FROM up
UNION ALL
SELECT false, tat FROM limits WHERE name = $1 AND key = $2 AND NOT EXISTS (SELECT 1 FROM up)`

// Spends are sent together (sendSpends): every write spends from the
// write limit before it is made, and a spend sent on its own was a
// round trip and a commit of its own for each one — as much of
// PostgreSQL's time as the create it let through (creates from one
// account, 64 connections: 2,526 and 2,580 a second with the shared
// limit, 4,109 and 4,756 with no limit; docs/PERFORMANCE.md). A batch of
// spends is one pipeline, so one transaction: each spend sees those
// before it, on its key as on others, and the batch commits once.

// sendSpends sends a batch of spends in the order of the rows they lock,
// so two batches — this instance's and another's — that spend on the same
// keys lock them in the same order and never wait for each other in a
// circle. Spends on one key keep the order they came in.
func (db *DB) sendSpends(batch []*readOp) {
	slices.SortStableFunc(batch, func(a, b *readOp) int { return strings.Compare(a.order, b.order) })
	db.sendReadBatch(batch)
}

// Spend takes one event from key's bucket when it has one; when it has
// none it records nothing and reports how long until one is back. When
// the database cannot be reached the event passes, and the log says so:
// a limiter must not lock everyone out.
func (l *Limiter) Spend(ctx context.Context, key string) (bool, time.Duration) {
	if l.every <= 0 {
		return true, 0
	}
	hash := l.hash(key)
	for attempt := 1; ; attempt++ {
		now := l.db.clock()
		var (
			ok  bool
			tat time.Time
		)
		op := &readOp{ctx: ctx, order: l.name + "\x00" + string(hash[:]), done: make(chan struct{}),
			queue: func(b *pgx.Batch) {
				b.Queue(spendSQL, l.name, hash[:], now, l.every.Microseconds(), l.slack.Microseconds())
			},
			read: func(br pgx.BatchResults) error { return br.QueryRow().Scan(&ok, &tat) },
		}
		err := l.db.sendOp(ctx, &l.db.spends, op)
		switch {
		case err == nil && ok:
			return true, 0
		case err == nil:
			return false, tat.Sub(now) - l.slack
		case errors.Is(err, pgx.ErrNoRows) && attempt == 1:
			// Another instance made the key's row between this
			// statement's snapshot and its insert: again, seeing it.
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
	_, err := l.db.pool.Exec(ctx, `UPDATE limits SET tat = tat - $3::bigint * interval '1 microsecond' WHERE name = $1 AND key = $2`,
		l.name, hash[:], l.every.Microseconds())
	if err != nil && ctx.Err() == nil {
		l.db.log.Warn("a shared limit could not be refunded", "limit", l.name, "err", err)
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
