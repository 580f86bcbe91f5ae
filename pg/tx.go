package pg

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"herald/model"
)

// Write transactions. A write runs its checks and changes through a
// writeTx, which collects the change-log entries the write implies; the
// transaction's last statement then takes their positions from the
// counter row and inserts them (see finishSQL). The counter's row lock is
// thus held only from that statement to the commit. (Creates, the writes
// that come in floods, have a path of their own: groupcommit.go.)
//
// Round trips are most of a write's cost on a small machine, so a
// transaction spends as few as it can: BEGIN goes out with its first
// statement, and COMMIT with its last, in one pipeline each.
//
// A write function may run more than once: PostgreSQL may end a
// transaction that deadlocked with another or could not be serialized,
// and the write is then run again from the start. Functions must
// therefore recompute everything they report from the transaction they
// are given.
//
// Sending COMMIT is a write's point of no return. A connection lost, or a
// deadline passed, before it leaves nothing behind: PostgreSQL rolls the
// transaction back. After it, and before its answer, the write may have
// committed (sentCommit, fault.go): it is then neither run again nor
// reported as not done.

// writeTx is one write transaction on a connection of its own, and the
// changes it will log.
type writeTx struct {
	conn  *pgxpool.Conn
	begun bool // BEGIN has gone out
	db    *DB

	changes []*model.Change
	// purge, when set, deletes many messages in the last statement (see
	// finishSQL); purged then receives how many it deleted.
	purge  *purge
	purged *int
	// posts are messages to create in the last round trip with the
	// notifications they cause (see postsSQL); a transaction with posts
	// logs no other change.
	posts []*postRow
}

// maxWriteAttempts bounds how often a write is run again after PostgreSQL
// ended it for a deadlock or a serialization failure.
const maxWriteAttempts = 5

// write runs fn in a transaction and commits it with its changes logged.
func (db *DB) write(ctx context.Context, fn func(w *writeTx) error) error {
	return db.writeOutcome(db.writeRetried(ctx, fn))
}

func (db *DB) writeRetried(ctx context.Context, fn func(w *writeTx) error) error {
	// A turn first, so that writes waiting on locks hold at most their
	// share of the pool (DB.writeTurns).
	db.writesWaiting.Add(1)
	select {
	case db.writeTurns <- struct{}{}:
		db.writesWaiting.Add(-1)
	case <-ctx.Done():
		db.writesWaiting.Add(-1)
		return ctx.Err()
	}
	defer func() { <-db.writeTurns }()
	var err error
	for attempt := 1; attempt <= maxWriteAttempts; attempt++ {
		if err = db.writeOnce(ctx, fn); !retryable(err) {
			break
		}
	}
	return err
}

func (db *DB) writeOnce(ctx context.Context, fn func(w *writeTx) error) (err error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	w := &writeTx{conn: conn, db: db}
	defer func() { w.release(err) }()
	if err := fn(w); err != nil {
		return err
	}
	start := time.Now()
	head, err := w.finish(ctx)
	if err != nil {
		return err
	}
	if head > 0 {
		if db.onCommit != nil {
			db.onCommit(time.Since(start), max(1, len(w.posts)))
		}
		db.feed.keep(w.changes...)
		db.feed.advance(head)
	}
	return nil
}

// release ends the transaction, if one is open (a write that failed), and
// gives the connection back. It rolls back only on a server that answered
// the failure, a refusal of Herald's or of PostgreSQL's: after a lost
// connection or a deadline, the write's answer must not wait for a
// server that may not answer; the pool closes a connection still in a
// transaction instead, and PostgreSQL rolls the transaction back.
func (w *writeTx) release(failed error) {
	conn := w.conn.Conn().PgConn()
	if failed != nil && conn.TxStatus() != 'I' && !conn.IsClosed() && !lost(failed) &&
		!errors.Is(failed, context.DeadlineExceeded) {
		ctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
		_, _ = w.conn.Exec(ctx, "ROLLBACK")
		cancel()
	}
	w.conn.Release()
}

// Exec runs a statement in the transaction, beginning it if need be.
func (w *writeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if w.begun {
		return w.conn.Exec(ctx, sql, args...)
	}
	br := w.sendWithBegin(ctx, sql, args)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// QueryRow runs a query of one row in the transaction, beginning it if
// need be, when the row is scanned.
func (w *writeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return &writeRow{w: w, ctx: ctx, sql: sql, args: args}
}

// Query runs a query in the transaction, beginning it first if need be.
func (w *writeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if !w.begun {
		if _, err := w.Exec(ctx, "SELECT 1"); err != nil {
			return nil, err
		}
	}
	return w.conn.Query(ctx, sql, args...)
}

// writeRow is QueryRow's row, read when scanned.
type writeRow struct {
	w    *writeTx
	ctx  context.Context
	sql  string
	args []any
}

func (r *writeRow) Scan(dest ...any) error {
	if r.w.begun {
		return r.w.conn.QueryRow(r.ctx, r.sql, r.args...).Scan(dest...)
	}
	br := r.w.sendWithBegin(r.ctx, r.sql, r.args)
	err := br.QueryRow().Scan(dest...)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// sendWithBegin sends BEGIN and a statement in one round trip, and reads
// BEGIN's answer; the statement's is next in the results.
func (w *writeTx) sendWithBegin(ctx context.Context, sql string, args []any) pgx.BatchResults {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return w.send(ctx, b)
}

// send sends b's statements in one round trip, after BEGIN when the
// transaction has not begun, whose answer it reads.
func (w *writeTx) send(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if w.begun {
		return w.conn.SendBatch(ctx, b)
	}
	full := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 1+len(b.QueuedQueries))}
	full.Queue("BEGIN")
	full.QueuedQueries = append(full.QueuedQueries, b.QueuedQueries...)
	br := w.conn.SendBatch(ctx, full)
	w.begun = true
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return pgx.FailedBatchResults(b, err)
	}
	return br
}

// pipeline sends b's statements in one round trip and hands their
// answers to read, in order.
func (w *writeTx) pipeline(ctx context.Context, b *pgx.Batch, read func(pgx.BatchResults) error) error {
	br := w.send(ctx, b)
	err := read(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// retryable reports the errors after which PostgreSQL expects the
// transaction to be tried again: never one met after its commit was sent.
func retryable(err error) bool {
	var (
		pe    *pgconn.PgError
		doubt *inDoubt
	)
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001") && !errors.As(err, &doubt)
}

// uniqueViolation reports whether err is a unique violation of constraint.
func uniqueViolation(err error, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == constraint
}

// record adds a change to the transaction's log entries. An update or a
// deletion scrubs the content of the message's change before it (see
// finishSQL), so the log keeps what the message is now, never what it was;
// a deletion logs no content.
func (w *writeTx) record(kind model.ChangeKind, m *model.Message) {
	ch := &model.Change{Kind: kind, Message: *m}
	if kind == model.MessageDeleted {
		ch.Message.Content = ""
	}
	w.changes = append(w.changes, ch)
}

// recordRevocation logs that tokens of userID stopped working before their
// time, so every instance's live streams of that account check theirs.
// Tokens that expire need none: a stream knows its token's expiry.
func (w *writeTx) recordRevocation(userID uint64) {
	w.changes = append(w.changes, &model.Change{Kind: model.TokensRevoked, UserID: userID})
}

// finishSQL is a write transaction's last statement: it takes as many
// positions as there are changes from the counter, inserts the changes,
// and the notifications of the NotificationCreated ones, and notifies the
// other instances, whose notification PostgreSQL delivers at commit. $1
// is the number of changes, $2 the time, $3 to $7 and $9 to $15 the
// changes' fields as arrays, and $8 the messages whose changes so far
// lose their content and mentions: those it updates or deletes.
//
// A transaction that ends with a purge (see purge) deletes the messages
// in the same statement, and their changes follow the others: however
// many they are, they never pass through this process. The messages they
// answer that stay count their replies down, before the counter's row is
// locked, as every transaction locks a message before it. $16 is then the
// account deleted with them (0 for none), $17 the e-mail their changes
// carry (NULL: each owner's), and the purge's own parameters follow, from
// $18.
func finishSQL(p *purge) string {
	var sb strings.Builder
	sb.WriteString("WITH ")
	purged, order, scrubbed, parentsFirst := "0", "", "", ""
	if p != nil {
		order = "d.id"
		if p.newestFirst {
			order = "d.id DESC"
		}
		sb.WriteString(`d AS (
	DELETE FROM messages m WHERE ` + p.where + `
	RETURNING m.id, m.owner_id, m.created_at, m.updated_at, m.revision, m.reply_to, m.mentions
), pr AS (
	UPDATE messages p SET replies = p.replies - r.n
	FROM (SELECT reply_to, count(*) AS n FROM d WHERE reply_to IS NOT NULL GROUP BY reply_to) r
	WHERE p.id = r.reply_to AND p.id NOT IN (SELECT id FROM d)
	RETURNING 1
), k AS (SELECT count(*) AS n, $16::bigint AS account FROM d), `)
		scrubbed = " OR message_id IN (SELECT id FROM d)"
		if p.account != 0 {
			// After its messages, in the same statement: the foreign key
			// is checked at the statement's end. Its notifications and
			// marks go with it (the foreign keys cascade).
			sb.WriteString("du AS (DELETE FROM users WHERE id = $16), ")
		}
		purged = "(SELECT n FROM k)"
		// Read before the counter's row is locked, so the messages
		// answered are locked first.
		parentsFirst = " WHERE (SELECT count(*) FROM pr) >= 0"
	}
	// The statement's snapshot does not see the changes it inserts: only
	// the older ones are scrubbed.
	sb.WriteString(`s AS (
	UPDATE changes SET content = NULL, mentions = NULL
	WHERE content IS NOT NULL AND (message_id = ANY($8::bigint[])` + scrubbed + `)
), c AS (
	UPDATE change_counter SET seq = seq + $1 + ` + purged + parentsFirst + `
	RETURNING seq, message_id
), x AS (
	SELECT * FROM unnest($3::smallint[], $4::bigint[], $5::bigint[], $6::text[], $7::bytea[],
		$9::timestamptz[], $10::timestamptz[], $11::bigint[], $12::bigint[], $13::text[], $14::smallint[], $15::bigint[])
		WITH ORDINALITY AS x(kind, user_id, message_id, email, content, created_at, updated_at, revision,
			reply_to, mentions, notification_kind, actor_id, n)
), ch AS (
	INSERT INTO changes (seq, kind, at, user_id, message_id, owner_email, content, created_at, updated_at, revision,
		reply_to, mentions)
	SELECT c.seq - ` + purged + ` - $1 + x.n, x.kind, $2, x.user_id, x.message_id, x.email, x.content,
		x.created_at, x.updated_at, x.revision, x.reply_to, x.mentions::jsonb
	FROM c, x
), nt AS (
	INSERT INTO notifications (id, user_id, kind, at, actor_id, message_id)
	SELECT c.seq - ` + purged + ` - $1 + x.n, x.user_id, x.notification_kind, $2, x.actor_id, x.message_id
	FROM c, x WHERE x.kind = ` + strconv.Itoa(int(model.NotificationCreated)) + `
)`)
	if p != nil {
		sb.WriteString(`, pd AS (
	INSERT INTO changes (seq, kind, at, user_id, message_id, owner_email, content, created_at, updated_at, revision,
		reply_to, mentions)
	SELECT c.seq - ` + purged + ` + row_number() OVER (ORDER BY ` + order + `), ` + strconv.Itoa(int(model.MessageDeleted)) + `, $2,
		d.owner_id, d.id, coalesce($17::text, u.email, ''), NULL, d.created_at, d.updated_at, d.revision, d.reply_to, d.mentions
	FROM c, d LEFT JOIN users u ON u.id = d.owner_id
)`)
	}
	sb.WriteString(`
SELECT c.seq, c.message_id, ` + purged + `, pg_notify('` + notifyChannel + `', c.seq || ':' || c.message_id) FROM c`)
	return sb.String()
}

// finish commits the transaction: with finishSQL for its changes, if it
// has any, in the same round trip as COMMIT. It returns the newest
// position it took (0 when it logged nothing).
func (w *writeTx) finish(ctx context.Context) (uint64, error) {
	if len(w.posts) > 0 {
		return w.finishPosts(ctx)
	}
	if len(w.changes) == 0 && w.purge == nil {
		if !w.begun {
			return 0, nil
		}
		_, err := w.conn.Exec(ctx, "COMMIT")
		return 0, sentCommit(err)
	}
	n := len(w.changes)
	kinds := make([]int16, n)
	users := make([]int64, n)
	ids := make([]int64, n)
	emails := make([]string, n)
	contents := make([][]byte, n)
	var scrub []int64
	created := make([]*time.Time, n)
	updated := make([]*time.Time, n)
	revisions := make([]int64, n)
	replyTos := make([]*int64, n)
	mentions := make([]*string, n)
	notificationKinds := make([]int16, n)
	actors := make([]int64, n)
	for i, ch := range w.changes {
		kinds[i] = int16(ch.Kind)
		if ch.Kind.Internal() {
			users[i] = int64(ch.UserID) // zero for SettingsChanged, which concerns no account
			continue
		}
		if ch.Kind == model.NotificationCreated {
			nt := ch.Notification
			users[i], ids[i] = int64(ch.UserID), int64(nt.MessageID)
			notificationKinds[i], actors[i] = int16(nt.Kind), int64(nt.Actor.ID)
			continue
		}
		m := &ch.Message
		users[i], ids[i], emails[i], revisions[i] = int64(m.OwnerID), int64(m.ID), m.OwnerEmail, int64(m.Revision)
		if ch.Kind != model.MessageDeleted {
			contents[i] = []byte(m.Content) // a deletion's stays nil: NULL
		}
		if ch.Kind != model.MessageCreated {
			scrub = append(scrub, int64(m.ID))
		}
		created[i], updated[i] = &m.CreatedAt, &m.UpdatedAt
		replyTos[i], mentions[i] = replyToArg(m.ReplyTo), mentionsJSON(m.Mentions)
	}
	at := w.db.clock()
	args := []any{n, at, kinds, users, ids, emails, contents, scrub, created, updated, revisions,
		replyTos, mentions, notificationKinds, actors}
	if w.purge != nil {
		var email any
		if w.purge.account != 0 {
			email = w.purge.email
		}
		args = append(args, int64(w.purge.account), email)
		args = append(args, w.purge.args...)
	}
	var head, messageID, purged int64
	if err := w.commitWith(ctx, finishSQL(w.purge), args, &head, &messageID, &purged, nil); err != nil {
		return 0, err
	}
	if w.purged != nil {
		*w.purged = int(purged)
	}
	// The changes took the positions before the purge's, in order.
	first := uint64(head-purged) - uint64(n) + 1
	for i, ch := range w.changes {
		ch.Seq, ch.At = first+uint64(i), at
		if ch.Notification != nil {
			ch.Notification.ID, ch.Notification.At = ch.Seq, at
		}
	}
	w.db.feed.sawMessage(uint64(messageID))
	return uint64(head), nil
}

// commitWith sends sql with args as the transaction's last statement,
// with BEGIN before it when the transaction has not begun and COMMIT
// after it, in one round trip, and scans its one row into dest. An error
// once the statement may have been sent leaves the write in doubt unless
// it proves otherwise (sentCommit).
func (w *writeTx) commitWith(ctx context.Context, sql string, args []any, dest ...any) error {
	b := &pgx.Batch{}
	if !w.begun {
		b.Queue("BEGIN")
	}
	b.Queue(sql, args...)
	b.Queue("COMMIT")
	br := w.conn.SendBatch(ctx, b)
	err := func() error {
		if !w.begun {
			w.begun = true
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if err := br.QueryRow().Scan(dest...); err != nil {
			return err
		}
		_, err := br.Exec()
		return err
	}()
	// Once COMMIT has answered, the write is durable, whatever Close
	// meets after it (the connection lost before its ReadyForQuery).
	_ = br.Close()
	if err != nil {
		return sentCommit(err)
	}
	return nil
}
