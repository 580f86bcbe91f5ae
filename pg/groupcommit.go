package pg

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"herald/model"
)

// Group commit of creates. Every logging transaction updates the counter
// row last and holds its lock through its commit, fsync included, so two
// instances, or two requests, can never log changes at once: one create
// at a time would cost a round trip and an fsync each. Creates are the
// writes that come in floods, so each instance queues them and a
// committer goroutine (one batch in flight, batches.go) writes everything
// queued in one statement, one transaction and one fsync, as the bbolt
// store's committer does.
//
// Every create of a batch is checked on its own (its token, its account),
// and one refused does not spoil the others. A statement that fails as a
// whole (an account deleted under it, a deadlock with another instance)
// is retried one create at a time, so a failure is reported only to the
// create it belongs to.

// maxCreateBatch bounds the creates of one statement.
const maxCreateBatch = 256

// createOp is one create waiting for its batch.
type createOp struct {
	// ctx is its call's: a batch ends by the earliest deadline of its
	// creates, and a create whose caller stopped waiting before its
	// batch took it is never sent.
	ctx     context.Context
	by      model.Caller
	content string
	terms   []string
	replyTo uint64                // the message a post answers (people.go); 0 for none
	key     *model.IdempotencyKey // nil: made without one
	// state is createQueued until a batch takes the create (createTaken)
	// or its caller stops waiting for it first (createAbandoned).
	state atomic.Int32
	done  chan createResult
}

// A create's states: queued, then taken by its batch or abandoned by its
// caller, whichever comes first.
const (
	createQueued int32 = iota
	createTaken
	createAbandoned
)

type createResult struct {
	m   *model.Message
	err error
}

// commitBatch writes one batch of creates and answers each of them.
func (db *DB) commitBatch(batch []*createOp) { db.runBatch(batch, db.commitDistinct) }

// runBatch hands batch to commit and answers each of its creates, but for
// those whose callers stopped waiting before the batch took them: those
// are dropped, never sent. Creates that carry the Idempotency-Key of an
// earlier one go after it has committed, so that they find its record
// (see apartByKey). The batch's statements, and any create sent again
// alone, end by the earliest deadline of its creates.
func (db *DB) runBatch(batch []*createOp, commit func(context.Context, []*createOp)) {
	taken := batch[:0:0]
	deadline := time.Now().Add(db.timeout)
	for _, op := range batch {
		if !op.state.CompareAndSwap(createQueued, createTaken) {
			continue
		}
		taken = append(taken, op)
		if op.ctx == nil {
			continue
		}
		if d, ok := op.ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
	}
	batch = taken
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	for len(batch) > 0 {
		var now []*createOp
		now, batch = apartByKey(batch)
		commit(ctx, now)
	}
}

// commitDistinct writes a batch whose creates carry distinct keys.
func (db *DB) commitDistinct(ctx context.Context, batch []*createOp) {
	if len(batch) == 1 {
		op := batch[0]
		m, err := db.createMessage(ctx, op)
		op.done <- createResult{m, err}
		return
	}
	var (
		results []createResult
		err     error
	)
	for attempt := 1; attempt <= maxWriteAttempts; attempt++ {
		if results, err = db.createBatch(ctx, batch); !retryable(err) {
			break
		}
	}
	if err != nil {
		// Rolled back, one of them or none is at fault: each goes on its
		// own. Otherwise the connection failed, or the time ran out, when
		// the batch may have committed: sent again, its messages could be
		// stored twice, so each create gets the error, its outcome
		// unknown, as it would have alone.
		sendAgain := rolledBack(err)
		for _, op := range batch {
			if !sendAgain {
				op.done <- createResult{nil, err}
				continue
			}
			m, err := db.createMessage(ctx, op)
			op.done <- createResult{m, err}
		}
		return
	}
	for i, op := range batch {
		op.done <- results[i]
	}
}

// createBatchSQL is createSQL for many creates: $1 the token hashes (NULL
// for a create by account ID), $2 the account IDs (0 for one by token),
// $3 the contents, $4 and $5 where each create's terms start and end in
// $7, all its terms end to end; $6 the time; $8 and $9 the hashes of the
// Idempotency-Keys (NULL for a create without one) and the fingerprints,
// $10 the oldest time a live record of a key has. Tokens are locked in
// hash order, as a batch of posts locks them. The keys are distinct
// (see apartByKey). Creates are numbered in the order given, and those
// that resolve and find no record of their key get consecutive IDs and
// positions in that order. It answers one row per create, in order: the
// caller as found, what was created, and the record found.
var createBatchSQL = `
WITH x AS (
	SELECT * FROM unnest($1::bytea[], $2::bigint[], $3::bytea[], $4::int[], $5::int[], $8::bytea[], $9::bytea[])
		WITH ORDINALITY AS x(hash, account, content, lo, hi, key, fingerprint, n)
), t AS (
	SELECT x.n, t.user_id, t.expires_at, t.last_used_at, u.email, u.handle, u.name
	FROM x JOIN tokens t ON t.hash = x.hash JOIN users u ON u.id = t.user_id
	ORDER BY t.hash
	FOR NO KEY UPDATE OF t
), a AS (
	SELECT x.n, u.id AS user_id, NULL::timestamptz AS expires_at, u.created_at AS last_used_at, u.email, u.handle, u.name
	FROM x JOIN users u ON u.id = x.account
	WHERE x.hash IS NULL
	FOR KEY SHARE OF u
), who AS (
	SELECT * FROM t UNION ALL SELECT * FROM a
), valid AS (
	SELECT who.n, who.user_id, who.email FROM who WHERE who.expires_at IS NULL OR who.expires_at > $6
), r AS (
	SELECT valid.n, r.fingerprint, r.message_id, r.created_at
	FROM valid JOIN x ON x.n = valid.n
	JOIN idempotency_keys r ON r.user_id = valid.user_id AND r.key = x.key AND r.created_at > $10
), ok AS (
	SELECT valid.n, valid.user_id, valid.email, row_number() OVER (ORDER BY valid.n) AS k
	FROM valid WHERE NOT EXISTS (SELECT 1 FROM r WHERE r.n = valid.n)
), k AS (
	SELECT count(*) AS cnt FROM ok
), c AS (
	UPDATE change_counter SET seq = seq + (SELECT cnt FROM k), message_id = message_id + (SELECT cnt FROM k),
		message_created = greatest(message_created, $6)
	WHERE (SELECT cnt FROM k) > 0
	RETURNING seq, message_id, message_created
), m AS (
	INSERT INTO messages (id, owner_id, content, terms, created_at, updated_at, revision)
	SELECT c.message_id - k.cnt + ok.k, ok.user_id, x.content, ($7::text[])[x.lo:x.hi], c.message_created, c.message_created, 1
	FROM c, k, ok JOIN x ON x.n = ok.n
), ch AS (
	INSERT INTO changes (seq, kind, at, user_id, message_id, owner_email, content, created_at, updated_at, revision)
	SELECT c.seq - k.cnt + ok.k, ` + strconv.Itoa(int(model.MessageCreated)) + `, $6, ok.user_id, c.message_id - k.cnt + ok.k,
		ok.email, x.content, c.message_created, c.message_created, 1
	FROM c, k, ok JOIN x ON x.n = ok.n
), ik AS (
	INSERT INTO idempotency_keys (user_id, key, fingerprint, message_id, created_at)
	SELECT ok.user_id, x.key, x.fingerprint, c.message_id - k.cnt + ok.k, c.message_created
	FROM c, k, ok JOIN x ON x.n = ok.n
	WHERE x.key IS NOT NULL
), nt AS (
	SELECT pg_notify('` + notifyChannel + `', c.seq || ':' || c.message_id) FROM c
)
SELECT x.n, who.user_id, who.expires_at, who.last_used_at, who.email, who.handle, who.name,
	c.seq - k.cnt + ok.k, c.message_id - k.cnt + ok.k, c.message_created, (SELECT count(*) FROM nt),
	r.fingerprint, r.message_id, r.created_at
FROM x
LEFT JOIN who ON who.n = x.n
LEFT JOIN ok ON ok.n = x.n
LEFT JOIN k ON ok.n IS NOT NULL
LEFT JOIN c ON ok.n IS NOT NULL
LEFT JOIN r ON r.n = x.n
ORDER BY x.n`

// createBatch writes batch in one statement, in its own transaction.
func (db *DB) createBatch(ctx context.Context, batch []*createOp) ([]createResult, error) {
	now := db.clock()
	n := len(batch)
	hashes := make([][]byte, n)
	accounts := make([]int64, n)
	contents := make([][]byte, n)
	los := make([]int32, n)
	his := make([]int32, n)
	keys := make([][]byte, n)
	fingerprints := make([][]byte, n)
	var terms []string
	for i, op := range batch {
		if hash, ok := op.by.Token(); ok {
			hashes[i] = hash[:]
		} else {
			accounts[i] = int64(op.by.UserID())
		}
		if op.key != nil {
			keys[i], fingerprints[i] = op.key.ID[:], op.key.Fingerprint[:]
		}
		contents[i] = []byte(op.content)
		los[i] = int32(len(terms) + 1)
		terms = append(terms, op.terms...)
		his[i] = int32(len(terms))
	}
	if terms == nil {
		terms = []string{}
	}
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	// From here on the statement, which commits by itself, may have been
	// sent: a failure leaves the batch in doubt unless it proves
	// otherwise (sentCommit).
	start := time.Now()
	rows, err := conn.Query(ctx, createBatchSQL, hashes, accounts, contents, los, his, now, terms,
		keys, fingerprints, now.Add(-model.IdempotencyWindow))
	if err != nil {
		return nil, sentCommit(err)
	}
	defer rows.Close()
	results := make([]createResult, n)
	var newestSeq, newestID uint64
	var committed []*model.Change
	for rows.Next() {
		var (
			i                 int64
			userID, seq, id   *int64
			expires, used, at *time.Time
			email             *string
			handle, name      *string
			notified          int64
			found             foundKey
		)
		if err := rows.Scan(&i, &userID, &expires, &used, &email, &handle, &name, &seq, &id, &at, &notified,
			&found.fingerprint, &found.messageID, &found.createdAt); err != nil {
			return nil, sentCommit(err)
		}
		op := batch[i-1]
		hash, byToken := op.by.Token()
		switch {
		case userID == nil && byToken:
			results[i-1].err = model.TokenUnknown()
		case userID == nil:
			results[i-1].err = model.AccountNotFound(op.by.UserID())
		case found.messageID != nil:
			if byToken {
				db.uses.Note(&model.Token{Hash: hash, LastUsedAt: used.UTC()}, now)
			}
			results[i-1].m, results[i-1].err = found.replay(op, &model.User{ID: uint64(*userID), Email: *email, Handle: *handle, Name: *name})
		case seq == nil:
			results[i-1].err = model.TokenExpired()
		default:
			if byToken {
				db.uses.Note(&model.Token{Hash: hash, LastUsedAt: used.UTC()}, now)
			}
			created := at.UTC()
			results[i-1].m = &model.Message{ID: uint64(*id), OwnerID: uint64(*userID), OwnerEmail: *email, OwnerHandle: *handle,
				OwnerName: *name, Content: op.content, CreatedAt: created, UpdatedAt: created, Revision: 1}
			committed = append(committed, &model.Change{Seq: uint64(*seq), Kind: model.MessageCreated, At: now, Message: *results[i-1].m})
			newestSeq, newestID = max(newestSeq, uint64(*seq)), max(newestID, uint64(*id))
		}
	}
	// Closing reads to the end of the statement, its commit included.
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, sentCommit(err)
	}
	if newestSeq > 0 {
		if db.onCommit != nil {
			db.onCommit(time.Since(start), n)
		}
		db.feed.sawMessage(newestID)
		db.feed.keep(committed...)
		db.feed.advance(newestSeq)
	}
	return results, nil
}
