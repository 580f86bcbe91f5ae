package pg

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// Import copies a whole Herald database, read from another store, into an
// empty PostgreSQL database, in one transaction: accounts, tokens,
// messages (with what they answer and mention), the change log,
// invitations, password resets, the audit log, the records of creates
// made with an Idempotency-Key and the notifications with their read
// marks keep their IDs, hashes, handles, times and positions, so every
// token and every invitation or reset code still works, every cursor
// still points where it did and a stream resumes with the Last-Event-ID
// it had. Either all of it is copied or none of it. The limits table is
// left empty: its buckets only slow guessing down for a while, and start
// full again.

// Importer is an import in progress. Feed it users, tokens, messages,
// changes, invitations, password resets, audit entries, idempotency
// records, notifications and notification marks, in that order (an
// account before anything that refers to it), then Finish it, or Abort
// it.
type Importer struct {
	db  *DB
	ctx context.Context
	tx  pgx.Tx

	// One buffer per table; ordered lists them in the order the foreign
	// keys need: a table's rows are copied before the next table's first.
	users, tokens, messages, changes, invites, resets, audit, keys *copyBuffer
	notifications, marks, certs                                    *copyBuffer
	pushSubs, pushPending                                          *copyBuffer
	ordered                                                        []*copyBuffer
	// pushKeys and pushPosition are Web Push's one key pair and the
	// sender's place, written by Finish.
	pushKeys      *model.VAPIDKeys
	pushPosition  *uint64
	newestCreated time.Time
	counts        ImportCounts
}

// copyBuffer holds rows for one table until a COPY sends them.
type copyBuffer struct {
	table   string
	columns []string
	rows    [][]any
}

// ImportCounts is how many records of each kind an import copied, or a
// database holds.
type ImportCounts struct {
	Users, Tokens, Messages, Changes, Invites, Resets, Audit, IdempotencyKeys, Notifications int
	// Certs is how many values HTTPS with ACME keeps (certificates, the
	// account's key).
	Certs int
	// PushSubscriptions is how many Web Push subscriptions.
	PushSubscriptions int
}

// ImportState is where the source's counters stand: the last user,
// message, invitation and audit entry IDs given out (deleted ones
// included, which must not be given out again), the newest change's
// position and the highest trimmed away.
type ImportState struct {
	UsersSeq, MessagesSeq, InvitesSeq, AuditSeq uint64
	ChangesHead, ChangesFloor                   uint64
	// PushSubscriptionsSeq is the last push subscription ID given out.
	PushSubscriptionsSeq uint64
}

// ErrNotEmpty: the import's target already holds data.
type ErrNotEmpty ImportCounts

func (e *ErrNotEmpty) Error() string {
	var held []string
	for _, c := range []struct {
		n           int
		one, plural string
	}{
		{e.Users, "account", "accounts"}, {e.Tokens, "token", "tokens"},
		{e.Messages, "message", "messages"}, {e.Changes, "change", "changes"},
		{e.Invites, "invitation", "invitations"}, {e.Resets, "password reset", "password resets"},
		{e.Audit, "audit entry", "audit entries"},
		{e.IdempotencyKeys, "idempotency key", "idempotency keys"},
		{e.Notifications, "notification", "notifications"},
		{e.Certs, "certificate value", "certificate values"},
		{e.PushSubscriptions, "push subscription", "push subscriptions"},
	} {
		switch {
		case c.n == 1:
			held = append(held, "1 "+c.one)
		case c.n > 1:
			held = append(held, fmt.Sprintf("%d %s", c.n, c.plural))
		}
	}
	if len(held) == 0 {
		held = []string{"Herald's data"}
	}
	list := held[len(held)-1]
	if len(held) > 1 {
		list = strings.Join(held[:len(held)-1], ", ") + " and " + list
	}
	return "the PostgreSQL database is not empty: it holds " + list +
		". migrate copies into a database with no Herald data (the tables an instance creates on its own are fine);" +
		" if this data is not wanted (an instance was used before the copy), stop the instances, drop the database," +
		" create it again and run migrate again"
}

// importBatch is how many rows go to PostgreSQL in one COPY.
const importBatch = 5000

// BeginImport starts an import. The tables are locked until it ends, so
// no instance writes meanwhile. Errors: *ErrNotEmpty when the database
// holds any account, token, message, change, invitation, password reset
// or audit entry.
func (db *DB) BeginImport(ctx context.Context) (*Importer, error) {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE users, tokens, messages, changes, change_counter, change_floor,
		invites, password_resets, audit, idempotency_keys, certs, settings, notifications, notification_marks,
		push_keys, push_subscriptions, push_position, push_pending IN EXCLUSIVE MODE`); err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	n, err := tableCounts(ctx, tx)
	var head, messageID int64
	if err == nil {
		err = tx.QueryRow(ctx, `SELECT seq, message_id FROM change_counter`).Scan(&head, &messageID)
	}
	if err == nil && (n != ImportCounts{} || head != 0 || messageID != 0) {
		err = (*ErrNotEmpty)(&n)
	}
	if err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	im := &Importer{
		db: db, ctx: ctx, tx: tx,
		users: &copyBuffer{table: "users", columns: []string{"id", "email", "email_key", "email_skeleton", "skeleton_twin", "password_hash",
			"roles", "created_at", "suspended", "last_seen_at", "handle", "name"}},
		tokens: &copyBuffer{table: "tokens", columns: []string{"hash", "handle", "user_id", "created_at", "expires_at", "last_used_at"}},
		messages: &copyBuffer{table: "messages", columns: []string{"id", "owner_id", "content", "terms", "created_at", "updated_at", "revision",
			"reply_to", "mentions"}},
		changes: &copyBuffer{table: "changes", columns: []string{"seq", "kind", "at", "user_id", "message_id", "owner_email", "content",
			"created_at", "updated_at", "revision", "reply_to", "mentions"}},
		invites: &copyBuffer{table: "invites", columns: []string{"id", "code_hash", "max_uses", "uses", "created_at", "expires_at", "created_by"}},
		resets:  &copyBuffer{table: "password_resets", columns: []string{"code_hash", "user_id", "created_at", "expires_at"}},
		audit: &copyBuffer{table: "audit", columns: []string{"id", "at", "action", "actor_id", "actor_email", "user_id", "user_email",
			"message_id", "invite_id", "count", "settings"}},
		keys:          &copyBuffer{table: "idempotency_keys", columns: []string{"user_id", "key", "fingerprint", "message_id", "created_at"}},
		notifications: &copyBuffer{table: "notifications", columns: []string{"id", "user_id", "kind", "at", "actor_id", "message_id"}},
		marks:         &copyBuffer{table: "notification_marks", columns: []string{"user_id", "read_up_to"}},
		certs:         &copyBuffer{table: "certs", columns: []string{"name", "data"}},
		pushSubs: &copyBuffer{table: "push_subscriptions", columns: []string{"id", "user_id", "endpoint", "p256dh", "auth",
			"expiration_time", "created_at", "last_success_at"}},
		pushPending: &copyBuffer{table: "push_pending", columns: []string{"notification_id", "subscription_id", "kind", "payload",
			"expires", "attempts", "not_before"}},
	}
	im.ordered = []*copyBuffer{im.users, im.tokens, im.messages, im.changes, im.invites, im.resets, im.audit, im.keys,
		im.notifications, im.marks, im.certs, im.pushSubs, im.pushPending}
	return im, nil
}

// add buffers a row for b, first copying the rows of the tables before
// it, and copies b's rows once there are importBatch of them.
func (im *Importer) add(b *copyBuffer, row []any) error {
	for _, before := range im.ordered {
		if before == b {
			break
		}
		if err := im.flush(before); err != nil {
			return err
		}
	}
	b.rows = append(b.rows, row)
	if len(b.rows) < importBatch {
		return nil
	}
	return im.flush(b)
}

// flush copies the rows buffered for b.
func (im *Importer) flush(b *copyBuffer) error {
	if len(b.rows) == 0 {
		return nil
	}
	if _, err := im.tx.CopyFrom(im.ctx, pgx.Identifier{b.table}, b.columns, pgx.CopyFromRows(b.rows)); err != nil {
		return fmt.Errorf("copying %s: %w", b.table, err)
	}
	b.rows = b.rows[:0]
	return nil
}

// User adds an account, with its ID, e-mail, handle, name, password hash,
// roles, creation time, suspension and last sighting.
func (im *Importer) User(u *model.User) error {
	var seen any // NULL: never known, which scanUser reads back as the zero time
	if !u.LastSeenAt.IsZero() {
		seen = u.LastSeenAt
	}
	im.counts.Users++
	// A twin of its own until Finish settles the skeletons: the source
	// may hold accounts that look alike, kept from before they were
	// refused.
	return im.add(im.users, []any{int64(u.ID), u.Email, model.EmailKey(u.Email), model.EmailSkeleton(u.Email), int64(u.ID),
		u.PasswordHash, u.Roles, u.CreatedAt, u.Suspended, seen, u.Handle, u.Name})
}

// Token adds a token by its hash, with its handle, account and times.
func (im *Importer) Token(t *model.Token) error {
	im.counts.Tokens++
	return im.add(im.tokens, []any{t.Hash[:], t.ID[:], int64(t.UserID), t.CreatedAt, t.ExpiresAt, t.LastUsedAt})
}

// Message adds a message, with its ID, owner, times, revision, the
// message it answers and its mentions; its search terms are computed
// here, by Herald's own rules, and its replies counted by Finish.
func (im *Importer) Message(m *model.Message) error {
	if m.CreatedAt.After(im.newestCreated) {
		im.newestCreated = m.CreatedAt
	}
	im.counts.Messages++
	return im.add(im.messages, []any{int64(m.ID), int64(m.OwnerID), []byte(m.Content), model.SortedTerms(m.Content),
		m.CreatedAt, m.UpdatedAt, int64(m.Revision), replyToArg(m.ReplyTo), mentionsJSON(m.Mentions)})
}

// Change adds a change of the log at its position.
func (im *Importer) Change(ch *model.Change) error {
	row := []any{int64(ch.Seq), int16(ch.Kind), ch.At}
	switch ch.Kind {
	case model.TokensRevoked, model.SettingsChanged:
		row = append(row, int64(ch.UserID), int64(0), "", nil, nil, nil, int64(0), nil, nil)
	case model.NotificationCreated:
		// The notification itself comes with the notifications.
		var messageID uint64
		if ch.Notification != nil {
			messageID = ch.Notification.MessageID
		}
		row = append(row, int64(ch.UserID), int64(messageID), "", nil, nil, nil, int64(0), nil, nil)
	default:
		m := &ch.Message
		var content []byte // NULL: a deletion, or a change scrubbed since
		mentions := mentionsJSON(m.Mentions)
		if ch.Kind != model.MessageDeleted && !ch.Scrubbed {
			content = []byte(m.Content)
		}
		if ch.Scrubbed {
			mentions = nil // as a scrub leaves it here
		}
		row = append(row, int64(m.OwnerID), int64(m.ID), m.OwnerEmail, content, m.CreatedAt, m.UpdatedAt, int64(m.Revision),
			replyToArg(m.ReplyTo), mentions)
	}
	im.counts.Changes++
	return im.add(im.changes, row)
}

// Invite adds an invitation, with its ID, code's hash, uses and times.
func (im *Importer) Invite(inv *model.Invite) error {
	im.counts.Invites++
	return im.add(im.invites, []any{int64(inv.ID), inv.CodeHash[:], int32(inv.MaxUses), int32(inv.Uses), inv.CreatedAt, inv.ExpiresAt,
		int64(inv.CreatedBy)})
}

// Reset adds an outstanding password reset by its code's hash.
func (im *Importer) Reset(r *model.PasswordReset) error {
	im.counts.Resets++
	return im.add(im.resets, []any{r.CodeHash[:], int64(r.UserID), r.CreatedAt, r.ExpiresAt})
}

// Audit adds an entry of the audit log, with its ID.
func (im *Importer) Audit(e *model.AuditEntry) error {
	im.counts.Audit++
	return im.add(im.audit, []any{int64(e.ID), e.At, string(e.Action), int64(e.ActorID), e.ActorEmail, int64(e.UserID), e.UserEmail,
		int64(e.MessageID), int64(e.InviteID), int32(e.Count), auditSettings(e)})
}

// Settings adds the settings the source holds.
func (im *Importer) Settings(s model.Settings) error {
	for name, value := range s {
		if _, err := im.tx.Exec(im.ctx, `INSERT INTO settings (name, value) VALUES ($1, $2)`, name, value); err != nil {
			return err
		}
	}
	return nil
}

// IdempotencyKey adds the record of a create made with an
// Idempotency-Key, live or not: a record past its window is ignored and
// swept here as in the source.
func (im *Importer) IdempotencyKey(r *model.IdempotencyRecord) error {
	im.counts.IdempotencyKeys++
	return im.add(im.keys, []any{int64(r.UserID), r.Key.ID[:], r.Key.Fingerprint[:], int64(r.ResourceID), r.CreatedAt})
}

// Notification adds a notification, with its ID (its change's position),
// account, kind, time, actor and message.
func (im *Importer) Notification(n *model.Notification) error {
	im.counts.Notifications++
	return im.add(im.notifications, []any{int64(n.ID), int64(n.UserID), int16(n.Kind), n.At, int64(n.Actor.ID), int64(n.MessageID)})
}

// NotificationMark adds the ID account userID's notifications are read
// up to; Finish counts the notifications each account keeps.
func (im *Importer) NotificationMark(userID, readUpTo uint64) error {
	return im.add(im.marks, []any{int64(userID), int64(readUpTo)})
}

// Cert adds a value HTTPS with ACME keeps (a certificate with its key,
// the account's key), so the instances on PostgreSQL go on serving the
// certificate the file held without ordering another.
func (im *Importer) Cert(name string, data []byte) error {
	im.counts.Certs++
	return im.add(im.certs, []any{name, data})
}

// PushKeys adds Web Push's key pair, so the instances sign with the one
// browsers subscribed with.
func (im *Importer) PushKeys(k model.VAPIDKeys) error {
	im.pushKeys = &k
	return nil
}

// PushSubscription adds a push subscription, with its ID.
func (im *Importer) PushSubscription(s *model.PushSubscription) error {
	im.counts.PushSubscriptions++
	return im.add(im.pushSubs, []any{int64(s.ID), int64(s.UserID), s.Endpoint, s.P256dh, s.Auth,
		nullTime(s.ExpirationTime), s.CreatedAt, nullTime(s.LastSuccessAt)})
}

// PushDelivery adds a queued push, so none is lost in the copy.
func (im *Importer) PushDelivery(d *model.PushDelivery) error {
	return im.add(im.pushPending, []any{int64(d.NotificationID), int64(d.SubscriptionID), int16(d.Kind), d.Payload,
		d.Expires, int32(d.Attempts), d.NotBefore})
}

// PushPosition adds the sender's place in the change log.
func (im *Importer) PushPosition(seq uint64) error {
	im.pushPosition = &seq
	return nil
}

// Finish copies what is buffered, sets the counters where the source's
// stood, and commits. It returns how many records it copied.
func (im *Importer) Finish(st ImportState) (ImportCounts, error) {
	defer im.Abort()
	for _, b := range im.ordered {
		if err := im.flush(b); err != nil {
			return ImportCounts{}, err
		}
	}
	if err := settleSkeletonTwins(im.ctx, im.tx); err != nil {
		return ImportCounts{}, err
	}
	// What the source counts apart, counted from what was copied: the
	// replies of each message, the notifications each account keeps.
	if _, err := im.tx.Exec(im.ctx, `UPDATE messages p SET replies = r.n
		FROM (SELECT reply_to, count(*) AS n FROM messages WHERE reply_to IS NOT NULL GROUP BY reply_to) r
		WHERE p.id = r.reply_to`); err != nil {
		return ImportCounts{}, fmt.Errorf("counting replies: %w", err)
	}
	if _, err := im.tx.Exec(im.ctx, `INSERT INTO notification_marks AS k (user_id, kept)
		SELECT user_id, count(*) FROM notifications GROUP BY user_id
		ON CONFLICT (user_id) DO UPDATE SET kept = excluded.kept`); err != nil {
		return ImportCounts{}, fmt.Errorf("counting notifications: %w", err)
	}
	var created any
	if !im.newestCreated.IsZero() {
		created = im.newestCreated
	}
	ctx := im.ctx
	if _, err := im.tx.Exec(ctx, `UPDATE change_counter SET seq = $1, message_id = $2, message_created = $3`,
		int64(st.ChangesHead), int64(st.MessagesSeq), created); err != nil {
		return ImportCounts{}, err
	}
	if _, err := im.tx.Exec(ctx, `UPDATE change_floor SET seq = $1`, int64(st.ChangesFloor)); err != nil {
		return ImportCounts{}, err
	}
	// The next account, invitation and audit entry get the ID after the
	// last the source gave out.
	for _, seq := range []struct {
		table string
		last  uint64
	}{{"users", st.UsersSeq}, {"invites", st.InvitesSeq}, {"audit", st.AuditSeq}, {"push_subscriptions", st.PushSubscriptionsSeq}} {
		if _, err := im.tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence($1, 'id'), greatest($2::bigint, 1), $2::bigint > 0)`,
			seq.table, int64(seq.last)); err != nil {
			return ImportCounts{}, fmt.Errorf("setting the sequence of %s: %w", seq.table, err)
		}
	}
	if k := im.pushKeys; k != nil {
		if _, err := im.tx.Exec(ctx, `INSERT INTO push_keys (private_key, public_key) VALUES ($1, $2)`, k.Private, k.Public); err != nil {
			return ImportCounts{}, fmt.Errorf("copying the push key pair: %w", err)
		}
	}
	if p := im.pushPosition; p != nil {
		if _, err := im.tx.Exec(ctx, `INSERT INTO push_position (seq) VALUES ($1)`, int64(*p)); err != nil {
			return ImportCounts{}, fmt.Errorf("copying the push position: %w", err)
		}
	}
	if err := im.tx.Commit(ctx); err != nil {
		return ImportCounts{}, err
	}
	// The statistics of the terms, from which searches with words are
	// planned (termstats.go), now rather than at autovacuum's first
	// visit: until then a rare word would be looked for in windows of
	// IDs, not in its postings. Everything is committed; a failure here
	// costs only that.
	if _, err := im.db.pool.Exec(ctx, `ANALYZE messages`); err != nil {
		im.db.log.Warn("analysing the imported messages; autovacuum will", "err", err)
	} else if _, err := im.db.refreshTermStats(ctx); err != nil {
		im.db.log.Warn("reading the imported terms' statistics", "err", err)
	}
	im.db.feed.sawMessage(st.MessagesSeq)
	im.db.feed.advance(st.ChangesHead)
	return im.counts, nil
}

// Abort gives the import up: nothing of it is kept. It does nothing after
// Finish.
func (im *Importer) Abort() { _ = im.tx.Rollback(context.Background()) }

// TableCounts is how many records of each kind an import copies the
// database holds, for herald migrate to compare with its source.
func (db *DB) TableCounts(ctx context.Context) (ImportCounts, error) {
	return tableCounts(ctx, db.pool)
}

// tableCounts counts the records of each kind an import copies.
func tableCounts(ctx context.Context, q querier) (ImportCounts, error) {
	var n ImportCounts
	err := q.QueryRow(ctx, `SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM tokens), (SELECT count(*) FROM messages),
		(SELECT count(*) FROM changes), (SELECT count(*) FROM invites), (SELECT count(*) FROM password_resets), (SELECT count(*) FROM audit),
		(SELECT count(*) FROM idempotency_keys), (SELECT count(*) FROM certs), (SELECT count(*) FROM notifications),
		(SELECT count(*) FROM push_subscriptions)`).
		Scan(&n.Users, &n.Tokens, &n.Messages, &n.Changes, &n.Invites, &n.Resets, &n.Audit, &n.IdempotencyKeys, &n.Certs,
			&n.Notifications, &n.PushSubscriptions)
	return n, err
}
