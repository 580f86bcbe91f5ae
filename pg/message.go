package pg

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// messageColumns reads a message joined to its owner (m, u).
const messageColumns = `m.id, m.owner_id, u.email, u.handle, u.name, m.content, m.created_at, m.updated_at, m.revision,
	coalesce(m.reply_to, 0), m.replies, m.mentions::text`

// scanMessage reads a row of messageColumns.
func scanMessage(row pgx.Row) (*model.Message, error) {
	var (
		m                                model.Message
		id, owner, rev, replyTo, replies int64
		content                          byteaString
		created, modified                time.Time
		mentions                         *string
	)
	if err := row.Scan(&id, &owner, &m.OwnerEmail, &m.OwnerHandle, &m.OwnerName, &content, &created, &modified, &rev,
		&replyTo, &replies, &mentions); err != nil {
		return nil, err
	}
	m.ID, m.OwnerID, m.Content, m.Revision = uint64(id), uint64(owner), string(content), uint64(rev)
	m.CreatedAt, m.UpdatedAt = created.UTC(), modified.UTC()
	m.ReplyTo, m.Replies = uint64(replyTo), uint64(replies)
	var err error
	m.Mentions, err = parseMentions(mentions)
	return &m, err
}

// CreateMessage stores content as a new message owned by the caller and
// returns it as stored. Errors: model.ErrInvalid for bad content,
// model.ErrUnauthorized or model.ErrNotFound when the caller does not
// resolve to a user.
func (db *DB) CreateMessage(ctx context.Context, by model.Caller, content string) (*model.Message, error) {
	return db.PostMessage(ctx, by, model.Draft{Content: content}, nil)
}

// CreateMessageWithKey is CreateMessage made with an Idempotency-Key:
// when the caller's live record of key says a create made a message, it
// returns that message as the first answer showed it, rebuilt with
// content, and writes nothing; otherwise it creates the message and the
// record in one statement (see idempotency.go). Errors: as CreateMessage,
// and model.ErrKeyReused when the record is of another request.
func (db *DB) CreateMessageWithKey(ctx context.Context, by model.Caller, content string, key model.IdempotencyKey) (*model.Message, error) {
	return db.PostMessage(ctx, by, model.Draft{Content: content}, &key)
}

// PostMessage stores draft as a new message of the caller's, made with
// key or without (nil): a reply when draft.ReplyTo is set, with its
// mentions resolved and the notifications it causes written in the same
// transaction. A message that neither answers nor can mention anyone
// goes to the group commit of creates; the others to the group commit
// of posts (people.go). Errors: as CreateMessageWithKey, and
// model.ErrInvalid naming replyTo when the message it answers does not
// exist.
func (db *DB) PostMessage(ctx context.Context, by model.Caller, draft model.Draft, key *model.IdempotencyKey) (*model.Message, error) {
	if err := draft.Validate(); err != nil {
		return nil, err
	}
	queue := &db.creates
	if draft.ReplyTo != 0 || mayMention(draft.Content) {
		queue = &db.posts
	}
	return db.queueCreate(ctx, queue, by, draft, key)
}

// queueCreate queues draft, validated, for queue's next batch, and waits
// for its answer.
func (db *DB) queueCreate(ctx context.Context, queue *batches[*createOp], by model.Caller, draft model.Draft, key *model.IdempotencyKey) (_ *model.Message, err error) {
	if by.Server() {
		return nil, model.AccountNeeded()
	}
	ctx, end := db.call(ctx, &err)
	defer end()
	// Computed before the create queues, on the caller's goroutine: the
	// costliest part of indexing, and none of it needs the database.
	op := &createOp{ctx: ctx, by: by, content: draft.Content, terms: model.SortedTerms(draft.Content), replyTo: draft.ReplyTo,
		key: key, done: make(chan createResult, 1)}
	if !queue.add(op) {
		return nil, errClosed
	}
	select {
	case r := <-op.done:
		return r.m, db.createOutcome(r.err)
	case <-ctx.Done():
	}
	if op.state.CompareAndSwap(createQueued, createAbandoned) {
		return nil, ctx.Err() // never sent
	}
	// In a batch already, which ends by this create's deadline at the
	// latest.
	r := <-op.done
	return r.m, db.createOutcome(r.err)
}

// createSQL is a create in one statement, so in one round trip and one
// transaction of its own: the caller resolved (a token locked as every
// write locks it, and checked unexpired at $2; an account by ID has no
// expiry), the caller's record of Idempotency-Key $5 looked for among
// those created after $7, then, unless one was found, as the last step,
// the counter's next position, message ID and creation time taken, the
// message, its change and the key's record (fingerprint $6) inserted,
// and the other instances notified. It always answers one row: the
// caller as found (all NULL when not), what was created (NULL when
// nothing was), and the record found (NULL when none was).
func createSQL(byToken bool) string {
	caller := `SELECT t.user_id, t.expires_at, t.last_used_at, u.email, u.handle, u.name FROM tokens t JOIN users u ON u.id = t.user_id
		WHERE t.hash = $1 FOR NO KEY UPDATE OF t`
	if !byToken {
		caller = `SELECT id AS user_id, NULL::timestamptz AS expires_at, created_at AS last_used_at, email, handle, name FROM users
		WHERE id = $1 FOR KEY SHARE`
	}
	return `
WITH t AS (` + caller + `
), valid AS (
	SELECT user_id, email FROM t WHERE expires_at IS NULL OR expires_at > $2
), r AS (
	SELECT r.fingerprint, r.message_id, r.created_at
	FROM valid JOIN idempotency_keys r ON r.user_id = valid.user_id AND r.key = $5::bytea AND r.created_at > $7
), ok AS (
	SELECT user_id, email FROM valid WHERE NOT EXISTS (SELECT 1 FROM r)
), c AS (
	UPDATE change_counter SET seq = seq + 1, message_id = message_id + 1, message_created = greatest(message_created, $2)
	WHERE EXISTS (SELECT 1 FROM ok)
	RETURNING seq, message_id, message_created
), m AS (
	INSERT INTO messages (id, owner_id, content, terms, created_at, updated_at, revision)
	SELECT c.message_id, ok.user_id, $3, $4, c.message_created, c.message_created, 1 FROM c, ok
), ch AS (
	INSERT INTO changes (seq, kind, at, user_id, message_id, owner_email, content, created_at, updated_at, revision)
	SELECT c.seq, ` + strconv.Itoa(int(model.MessageCreated)) + `, $2, ok.user_id, c.message_id, ok.email, $3,
		c.message_created, c.message_created, 1 FROM c, ok
), ik AS (
	INSERT INTO idempotency_keys (user_id, key, fingerprint, message_id, created_at)
	SELECT ok.user_id, $5, $6::bytea, c.message_id, c.message_created FROM c, ok WHERE $5 IS NOT NULL
)
SELECT t.user_id, t.expires_at, t.last_used_at, t.email, t.handle, t.name, c.seq, c.message_id, c.message_created,
	CASE WHEN c.seq IS NOT NULL THEN pg_notify('` + notifyChannel + `', c.seq || ':' || c.message_id) END,
	r.fingerprint, r.message_id, r.created_at
FROM (SELECT 1) one LEFT JOIN t ON true LEFT JOIN c ON true LEFT JOIN r ON true`
}

var (
	createByTokenSQL = createSQL(true)
	createByUserSQL  = createSQL(false)
)

// createMessage runs createSQL, again after a deadlock, and again after
// its Idempotency-Key's record was in the way (see keyInTheWay).
func (db *DB) createMessage(ctx context.Context, op *createOp) (*model.Message, error) {
	var err error
	for attempt := 1; attempt <= maxWriteAttempts; attempt++ {
		var m *model.Message
		m, err = db.createOnce(ctx, op)
		if keyInTheWay(op, err) {
			if err = db.dropDeadKey(ctx, op.key); err != nil {
				return nil, err
			}
			continue
		}
		if !retryable(err) {
			return m, err
		}
	}
	return nil, err
}

// createOnce runs createSQL once.
func (db *DB) createOnce(ctx context.Context, op *createOp) (*model.Message, error) {
	now := db.clock()
	by := op.by
	hash, byToken := by.Token()
	sql, who := createByUserSQL, any(int64(by.UserID()))
	if byToken {
		sql, who = createByTokenSQL, hash[:]
	}
	var keyID, fingerprint []byte // NULL: no key
	if op.key != nil {
		keyID, fingerprint = op.key.ID[:], op.key.Fingerprint[:]
	}
	var (
		userID, seq, id   *int64
		expires, used, at *time.Time
		email             *string
		handle, name      *string
		found             foundKey
	)
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	start := time.Now()
	// The statement commits by itself: once it may have been sent, a
	// failure leaves the create in doubt unless it proves otherwise.
	err = conn.QueryRow(ctx, sql, who, now, []byte(op.content), op.terms, keyID, fingerprint, now.Add(-model.IdempotencyWindow)).
		Scan(&userID, &expires, &used, &email, &handle, &name, &seq, &id, &at, nil, &found.fingerprint, &found.messageID, &found.createdAt)
	if err != nil {
		return nil, sentCommit(err)
	}
	switch {
	case userID == nil && byToken:
		return nil, model.TokenUnknown()
	case userID == nil:
		return nil, model.AccountNotFound(by.UserID())
	case found.messageID != nil:
		if byToken {
			db.uses.Note(&model.Token{Hash: hash, LastUsedAt: used.UTC()}, now)
		}
		return found.replay(op, &model.User{ID: uint64(*userID), Email: *email, Handle: *handle, Name: *name})
	case seq == nil:
		return nil, model.TokenExpired()
	}
	if byToken {
		db.uses.Note(&model.Token{Hash: hash, LastUsedAt: used.UTC()}, now)
	}
	if db.onCommit != nil {
		db.onCommit(time.Since(start), 1)
	}
	created := at.UTC()
	m := &model.Message{ID: uint64(*id), OwnerID: uint64(*userID), OwnerEmail: *email, OwnerHandle: *handle, OwnerName: *name,
		Content: op.content, CreatedAt: created, UpdatedAt: created, Revision: 1}
	db.feed.sawMessage(m.ID)
	db.feed.keep(&model.Change{Seq: uint64(*seq), Kind: model.MessageCreated, At: now, Message: *m})
	db.feed.advance(uint64(*seq))
	return m, nil
}

// Message reads message id for the caller, whose account it returns,
// resolved in the same round trip, sent together with other reads
// (readbatch.go). Errors: model.ErrUnauthorized, model.ErrNotFound.
func (db *DB) Message(ctx context.Context, by model.Caller, id uint64) (_ *model.User, _ *model.Message, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	var (
		resolve resolver
		u       *model.User
		m       *model.Message
	)
	err = db.readTogether(ctx, func(b *pgx.Batch) {
		resolve = db.queueCaller(b, by)
		b.Queue(`SELECT `+messageColumns+` FROM messages m JOIN users u ON u.id = m.owner_id WHERE m.id = $1`, int64(id))
	}, func(br pgx.BatchResults) error {
		var err error
		if u, err = resolve(br); err != nil {
			return err
		}
		m, err = scanMessage(br.QueryRow())
		if errors.Is(err, pgx.ErrNoRows) {
			return model.MessageNotFound(id)
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return u, m, nil
}

// ownedMessage loads a message for a write, resolving the caller and
// checking existence, ownership and the caller's precondition in that
// order, all inside the write transaction, with the message's row locked
// until the commit, so nothing can change between check and write. With
// moderate, an administrator passes the ownership check for anyone's
// message. It returns the caller with the message.
func (w *writeTx) ownedMessage(ctx context.Context, id uint64, by model.Caller, pre model.Precondition, moderate bool) (*model.User, *model.Message, error) {
	u, err := w.caller(ctx, by)
	if err != nil {
		return nil, nil, err
	}
	m, err := scanMessage(w.QueryRow(ctx, `SELECT `+messageColumns+` FROM messages m JOIN users u ON u.id = m.owner_id
		WHERE m.id = $1 FOR UPDATE OF m`, int64(id)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, model.MessageNotFound(id)
	}
	if err != nil {
		return nil, nil, err
	}
	if moderate && u.ID != m.OwnerID {
		// Allowed by the role alone: the role as committed now.
		if err := w.lockRoles(ctx, u); err != nil {
			return nil, nil, err
		}
	}
	if err := model.CheckWriter(u, m, moderate); err != nil {
		return nil, nil, err
	}
	if pre != nil && !pre(m) {
		return nil, nil, model.MessageChanged(id)
	}
	return u, m, nil
}

// UpdateMessage applies upd to message id on behalf of the caller and
// returns the message as stored. An update that changes nothing leaves the
// message, its UpdatedAt and its Revision alone. Errors: model.ErrInvalid,
// model.ErrUnauthorized, model.ErrNotFound, model.ErrForbidden (not the
// owner), model.ErrPrecondition (pre refused).
func (db *DB) UpdateMessage(ctx context.Context, id uint64, by model.Caller, upd model.MessageUpdate, pre model.Precondition) (_ *model.Message, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	var newTerms []string
	if upd.Content != nil {
		var v model.ValidationError
		v.CheckContent("content", *upd.Content)
		if err := v.Err(); err != nil {
			return nil, err
		}
		newTerms = model.SortedTerms(*upd.Content)
	}
	var out *model.Message
	err = db.write(ctx, func(w *writeTx) error {
		_, m, err := w.ownedMessage(ctx, id, by, pre, false)
		if err != nil {
			return err
		}
		out = m
		if upd.Content == nil || *upd.Content == m.Content {
			return nil
		}
		m.Content = *upd.Content
		m.UpdatedAt = db.clock()
		m.Revision++
		if m.Mentions, err = w.resolveMentions(ctx, m.Content, m.Mentions); err != nil {
			return err
		}
		if _, err := w.Exec(ctx, `UPDATE messages SET content = $2, terms = $3, updated_at = $4, revision = $5, mentions = $6::jsonb
			WHERE id = $1`, int64(id), []byte(m.Content), newTerms, m.UpdatedAt, int64(m.Revision), mentionsJSON(m.Mentions)); err != nil {
			return err
		}
		w.record(model.MessageUpdated, m)
		return w.notifyMentioned(ctx, m)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteMessage removes message id on behalf of the caller and returns it
// as it was. An administrator may delete anyone's, which the audit log
// records in the same transaction. Errors: model.ErrUnauthorized,
// model.ErrNotFound, model.ErrForbidden, model.ErrPrecondition.
func (db *DB) DeleteMessage(ctx context.Context, id uint64, by model.Caller, pre model.Precondition) (_ *model.Message, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	var out *model.Message
	err = db.write(ctx, func(w *writeTx) error {
		u, m, err := w.ownedMessage(ctx, id, by, pre, true)
		if err != nil {
			return err
		}
		// The message it answers, if any, counts one reply less.
		if _, err := w.Exec(ctx, `WITH d AS (DELETE FROM messages WHERE id = $1 RETURNING reply_to)
			UPDATE messages p SET replies = p.replies - 1 FROM d WHERE p.id = d.reply_to`, int64(id)); err != nil {
			return err
		}
		if m.OwnerID != u.ID {
			e := &model.AuditEntry{Action: model.AuditDeleteMessage, UserID: m.OwnerID, UserEmail: m.OwnerEmail, MessageID: m.ID}
			if err := w.audit(ctx, u, e); err != nil {
				return err
			}
		}
		w.record(model.MessageDeleted, m)
		out = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
