package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// Import copies a whole Herald database, read from another store, into an
// empty PostgreSQL database, in one transaction: accounts, tokens,
// messages and the change log keep their IDs, hashes, handles, times and
// positions, so every token still works, every cursor still points where
// it did and a stream resumes with the Last-Event-ID it had. Either all
// of it is copied or none of it.

// Importer is an import in progress. Feed it users, tokens, messages and
// changes, in that order, then Finish it, or Abort it.
type Importer struct {
	db  *DB
	ctx context.Context
	tx  pgx.Tx

	// One buffer per table, in the order the foreign keys need: a table's
	// rows are copied before the next table's first.
	users, tokens, messages, changes *copyBuffer
	newestCreated                    time.Time
	counts                           ImportCounts
}

// copyBuffer holds rows for one table until a COPY sends them.
type copyBuffer struct {
	table   string
	columns []string
	rows    [][]any
}

// ImportCounts is how many records of each kind an import copied.
type ImportCounts struct {
	Users, Tokens, Messages, Changes int
}

// ImportState is where the source's counters stand: the last user and
// message IDs given out (deleted ones included, which must not be given
// out again), the newest change's position and the highest trimmed away.
type ImportState struct {
	UsersSeq, MessagesSeq     uint64
	ChangesHead, ChangesFloor uint64
}

// ErrNotEmpty: the import's target already holds data.
type ErrNotEmpty struct{ Users, Tokens, Messages, Changes int }

func (e *ErrNotEmpty) Error() string {
	return fmt.Sprintf("the PostgreSQL database is not empty (%d users, %d tokens, %d messages, %d changes); migrate copies into an empty database only",
		e.Users, e.Tokens, e.Messages, e.Changes)
}

// importBatch is how many rows go to PostgreSQL in one COPY.
const importBatch = 5000

// BeginImport starts an import. The tables are locked until it ends, so
// no instance writes meanwhile. Errors: *ErrNotEmpty when the database
// holds any account, token, message or change.
func (db *DB) BeginImport(ctx context.Context) (*Importer, error) {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE users, tokens, messages, changes, change_counter, change_floor IN EXCLUSIVE MODE`); err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	var n ErrNotEmpty
	var head, messageID int64
	err = tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM tokens), (SELECT count(*) FROM messages),
		(SELECT count(*) FROM changes), (SELECT seq FROM change_counter), (SELECT message_id FROM change_counter)`).
		Scan(&n.Users, &n.Tokens, &n.Messages, &n.Changes, &head, &messageID)
	if err == nil && (n != ErrNotEmpty{} || head != 0 || messageID != 0) {
		err = &n
	}
	if err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	return &Importer{
		db: db, ctx: ctx, tx: tx,
		users:    &copyBuffer{table: "users", columns: []string{"id", "email", "email_key", "password_hash", "roles", "created_at"}},
		tokens:   &copyBuffer{table: "tokens", columns: []string{"hash", "handle", "user_id", "created_at", "expires_at", "last_used_at"}},
		messages: &copyBuffer{table: "messages", columns: []string{"id", "owner_id", "content", "terms", "created_at", "updated_at", "revision"}},
		changes: &copyBuffer{table: "changes", columns: []string{"seq", "kind", "at", "user_id", "message_id", "owner_email", "content", "before",
			"created_at", "updated_at", "revision"}},
	}, nil
}

// add buffers a row for b, first copying the rows of the tables before
// it, and copies b's rows once there are importBatch of them.
func (im *Importer) add(b *copyBuffer, row []any) error {
	for _, before := range []*copyBuffer{im.users, im.tokens, im.messages} {
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

// User adds an account, with its ID, e-mail, password hash, roles and
// creation time.
func (im *Importer) User(u *model.User) error {
	im.counts.Users++
	return im.add(im.users, []any{int64(u.ID), u.Email, model.EmailKey(u.Email), u.PasswordHash, u.Roles, u.CreatedAt})
}

// Token adds a token by its hash, with its handle, account and times.
func (im *Importer) Token(t *model.Token) error {
	im.counts.Tokens++
	return im.add(im.tokens, []any{t.Hash[:], t.ID[:], int64(t.UserID), t.CreatedAt, t.ExpiresAt, t.LastUsedAt})
}

// Message adds a message, with its ID, owner, times and revision; its
// search terms are computed here, by Herald's own rules.
func (im *Importer) Message(m *model.Message) error {
	if m.CreatedAt.After(im.newestCreated) {
		im.newestCreated = m.CreatedAt
	}
	im.counts.Messages++
	return im.add(im.messages, []any{int64(m.ID), int64(m.OwnerID), []byte(m.Content), model.SortedTerms(m.Content),
		m.CreatedAt, m.UpdatedAt, int64(m.Revision)})
}

// Change adds a change of the log at its position.
func (im *Importer) Change(ch *model.Change) error {
	row := []any{int64(ch.Seq), int16(ch.Kind), ch.At}
	switch ch.Kind {
	case model.TokensRevoked:
		row = append(row, int64(ch.UserID), int64(0), "", []byte{}, []byte{}, nil, nil, int64(0))
	default:
		m := &ch.Message
		row = append(row, int64(m.OwnerID), int64(m.ID), m.OwnerEmail, []byte(m.Content), []byte(ch.Before), m.CreatedAt, m.UpdatedAt, int64(m.Revision))
	}
	im.counts.Changes++
	return im.add(im.changes, row)
}

// Finish copies what is buffered, sets the counters where the source's
// stood, and commits. It returns how many records it copied.
func (im *Importer) Finish(st ImportState) (ImportCounts, error) {
	defer im.Abort()
	for _, b := range []*copyBuffer{im.users, im.tokens, im.messages, im.changes} {
		if err := im.flush(b); err != nil {
			return ImportCounts{}, err
		}
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
	// The next account gets the ID after the last the source gave out.
	if _, err := im.tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence('users', 'id'), greatest($1::bigint, 1), $1::bigint > 0)`,
		int64(st.UsersSeq)); err != nil {
		return ImportCounts{}, err
	}
	if err := im.tx.Commit(ctx); err != nil {
		return ImportCounts{}, err
	}
	im.db.feed.sawMessage(st.MessagesSeq)
	im.db.feed.advance(st.ChangesHead)
	return im.counts, nil
}

// Abort gives the import up: nothing of it is kept. It does nothing after
// Finish.
func (im *Importer) Abort() { _ = im.tx.Rollback(context.Background()) }

// ChangeCount is how many changes the log holds, for herald migrate to
// compare with its source.
func (db *DB) ChangeCount(ctx context.Context) (int, error) {
	var n int
	err := db.pool.QueryRow(ctx, `SELECT count(*) FROM changes`).Scan(&n)
	return n, err
}
