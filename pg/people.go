package pg

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// People: replies, mentions and notifications. A reply names the message
// it answers in messages.reply_to, and the message answered counts its
// replies in messages.replies, changed in the transactions that create and
// delete replies; those lock the message answered before the counter's row,
// as every transaction locks what it writes before the counter, so the
// count is exact whatever runs at once. Replies are listed in ID order,
// which is commit order, so a page resumes after the last ID it showed and
// never skips or repeats one.
//
// A message that neither answers another nor holds an @ is created by
// the group commit of creates (groupcommit.go), in one statement. Any
// other goes to the group commit of posts: each instance queues them, and
// one goroutine writes everything queued in one transaction, with one
// fsync, as the creates' does, for the same reason: every logging
// transaction holds the counter's row lock through its commit, so posts
// committed one at a time would wait for each other's fsync (and a
// popular person, notified by many, would have their marks' row locked
// by each in turn). The batch's transaction takes a few round trips,
// whatever its size: every post's caller and the accounts its @handles
// name; the Idempotency-Keys' records; the messages answered counted up,
// in ID order; the notified accounts' marks counted up, in ID order; and
// last, with the COMMIT, one statement (postsSQL) that takes the
// messages' IDs and the positions of their changes and their
// notifications' changes from the counter and inserts them all. A
// notification's ID is the position of its change, so IDs rise in commit
// order and a stream resumes across notifications as across messages. A
// post refused (its token, the message it answers) writes nothing and
// spoils none of the others; a batch that fails as a whole is sent again
// one post at a time.
//
// Every account notified is locked (FOR KEY SHARE) before the counter, so
// an account's deletion either waits for the transaction or is seen by it:
// a notification never outlives its account. notification_marks holds
// each account's read-up-to mark and how many notifications it keeps; its
// row's lock orders the transactions that notify the account, so the
// newest model.MaxNotifications are kept exactly.

// mayMention reports whether content holds a candidate @handle, cheaply:
// a plain message skips model.MentionedHandles.
func mayMention(content string) bool {
	return strings.IndexByte(content, '@') >= 0 && len(model.MentionedHandles(content)) > 0
}

// mentionJSON is a mention as messages.mentions holds it.
type mentionJSON struct {
	ID     uint64 `json:"id"`
	Handle string `json:"handle"`
}

// mentionsJSON is ms as messages.mentions holds them, nil (NULL) for none.
func mentionsJSON(ms []model.Mention) *string {
	if len(ms) == 0 {
		return nil
	}
	out := make([]mentionJSON, len(ms))
	for i, m := range ms {
		out[i] = mentionJSON{m.UserID, m.Handle}
	}
	b, err := json.Marshal(out)
	if err != nil {
		panic(err) // a slice of plain structs always marshals
	}
	s := string(b)
	return &s
}

// parseMentions reads mentions as mentionsJSON writes them.
func parseMentions(s *string) ([]model.Mention, error) {
	if s == nil {
		return nil, nil
	}
	var in []mentionJSON
	if err := json.Unmarshal([]byte(*s), &in); err != nil {
		return nil, fmt.Errorf("reading mentions: %w", err)
	}
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]model.Mention, len(in))
	for i, m := range in {
		out[i] = model.Mention{UserID: m.ID, Handle: m.Handle}
	}
	return out, nil
}

// replyToArg is a message's reply_to as a parameter: NULL for none.
func replyToArg(id uint64) *int64 {
	if id == 0 {
		return nil
	}
	v := int64(id)
	return &v
}

// mentionsSQL resolves $1, the candidate handles in order of first
// appearance, to the first model.MaxMentions accounts that exist, and
// locks those against deletion until the commit, in ID order.
var mentionsSQL = `
WITH c AS (
	SELECT c.handle, c.i FROM unnest($1::text[]) WITH ORDINALITY AS c(handle, i)
), f AS (
	SELECT u.id FROM c JOIN users u ON u.handle = c.handle ORDER BY c.i LIMIT ` + strconv.Itoa(model.MaxMentions) + `
)
SELECT u.id, u.handle FROM users u WHERE u.id IN (SELECT id FROM f) ORDER BY u.id FOR KEY SHARE OF u`

// keptMentionsSQL locks the accounts of $1 that still exist against
// deletion until the commit, in ID order, and returns them.
const keptMentionsSQL = `SELECT id FROM users WHERE id = ANY($1) ORDER BY id FOR KEY SHARE`

// resolveMentions turns the @handles of content into the accounts they
// name, the first model.MaxMentions that exist, in order of first
// appearance, each locked against deletion until the commit. An edit
// passes the message's mentions before it as kept: a handle the content
// still spells keeps naming the account it named when it was written,
// whoever holds the handle now, so a handle given up and taken by someone
// else never brings them what was written to its earlier holder.
func (w *writeTx) resolveMentions(ctx context.Context, content string, kept []model.Mention) ([]model.Mention, error) {
	if strings.IndexByte(content, '@') < 0 {
		return nil, nil
	}
	candidates := model.MentionedHandles(content)
	if len(candidates) == 0 {
		return nil, nil
	}
	if len(kept) > 0 {
		return w.resolveMentionsKept(ctx, candidates, kept)
	}
	found, err := w.handlesFound(ctx, mentionsSQL, candidates)
	if err != nil {
		return nil, err
	}
	return inOrder(candidates, found), nil
}

// handlesFound runs sql, a query of accounts' id and handle, with arg,
// and returns the handles it found with their accounts.
func (w *writeTx) handlesFound(ctx context.Context, sql string, arg any) (map[string]uint64, error) {
	rows, err := w.Query(ctx, sql, arg)
	if err != nil {
		return nil, err
	}
	return collectHandles(rows)
}

// collectHandles reads rows of accounts' id and handle.
func collectHandles(rows pgx.Rows) (map[string]uint64, error) {
	defer rows.Close()
	found := map[string]uint64{}
	for rows.Next() {
		var (
			id     int64
			handle string
		)
		if err := rows.Scan(&id, &handle); err != nil {
			return nil, err
		}
		found[handle] = uint64(id)
	}
	return found, rows.Err()
}

// inOrder returns the mentions of candidates, in order, that found
// resolves: the first model.MaxMentions.
func inOrder(candidates []string, found map[string]uint64) []model.Mention {
	var out []model.Mention
	for _, h := range candidates {
		if id, ok := found[h]; ok && len(out) < model.MaxMentions {
			out = append(out, model.Mention{UserID: id, Handle: h})
		}
	}
	return out
}

// batchMentionsSQL resolves $1, the distinct candidate handles of a batch
// of posts, to the accounts that hold them, and locks those against
// deletion until the commit, in ID order: each account once, however many
// of the batch's posts name it.
const batchMentionsSQL = `SELECT id, handle FROM users WHERE handle = ANY($1) ORDER BY id FOR KEY SHARE`

// resolveMentionsKept is resolveMentions for an edit of a message that
// mentioned kept.
func (w *writeTx) resolveMentionsKept(ctx context.Context, candidates []string, kept []model.Mention) ([]model.Mention, error) {
	var lookup []string
	for _, h := range candidates {
		if !slices.ContainsFunc(kept, func(m model.Mention) bool { return m.Handle == h }) {
			lookup = append(lookup, h)
		}
	}
	found := map[string]uint64{}
	if len(lookup) > 0 {
		var err error
		if found, err = w.handlesFound(ctx, `SELECT id, handle FROM users WHERE handle = ANY($1)`, lookup); err != nil {
			return nil, err
		}
	}
	var chosen []model.Mention
	var ids []int64
	for _, h := range candidates {
		if i := slices.IndexFunc(kept, func(m model.Mention) bool { return m.Handle == h }); i >= 0 {
			chosen = append(chosen, kept[i])
		} else if id, ok := found[h]; ok {
			chosen = append(chosen, model.Mention{UserID: id, Handle: h})
		} else {
			continue
		}
		ids = append(ids, int64(chosen[len(chosen)-1].UserID))
	}
	// Locked, and only those that still exist: a kept account may have
	// gone, and its handle is not looked up again.
	rows, err := w.Query(ctx, keptMentionsSQL, ids)
	if err != nil {
		return nil, err
	}
	exists := map[uint64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		exists[uint64(id)] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []model.Mention
	for _, m := range chosen {
		if exists[m.UserID] && len(out) < model.MaxMentions {
			out = append(out, m)
		}
	}
	return out, nil
}

// keepNotifications counts the notifications of ns in their accounts'
// marks, locked until the commit (in ID order, so two transactions
// notifying the same accounts never wait for each other in turn), and
// deletes the oldest of those that would keep more than
// model.MaxNotifications with them.
func (w *writeTx) keepNotifications(ctx context.Context, ns []model.Notification) error {
	if len(ns) == 0 {
		return nil
	}
	counts := make(map[int64]int64, len(ns))
	for _, n := range ns {
		counts[int64(n.UserID)]++
	}
	ids := slices.Sorted(maps.Keys(counts))
	adds := make([]int64, len(ids))
	for i, id := range ids {
		adds[i] = counts[id]
	}
	rows, err := w.Query(ctx, `INSERT INTO notification_marks AS k (user_id, kept)
		SELECT id, n FROM unnest($1::bigint[], $2::bigint[]) AS x(id, n) ORDER BY id
		ON CONFLICT (user_id) DO UPDATE SET kept = k.kept + excluded.kept
		RETURNING user_id, kept`, ids, adds)
	if err != nil {
		return err
	}
	var over, excess []int64
	for rows.Next() {
		var id, kept int64
		if err := rows.Scan(&id, &kept); err != nil {
			rows.Close()
			return err
		}
		if kept > model.MaxNotifications {
			over, excess = append(over, id), append(excess, kept-model.MaxNotifications)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(over) == 0 {
		return err
	}
	// The marks' locks are held: no other transaction changes these
	// accounts' notifications meanwhile but a trim, which counts what it
	// deletes itself.
	_, err = w.Exec(ctx, `WITH o AS (
			SELECT * FROM unnest($1::bigint[], $2::bigint[]) AS o(user_id, excess)
		), d AS (
			DELETE FROM notifications WHERE id IN (
				SELECT x.id FROM o CROSS JOIN LATERAL (
					SELECT id FROM notifications n WHERE n.user_id = o.user_id ORDER BY n.id LIMIT o.excess) x)
			RETURNING user_id
		)
		UPDATE notification_marks k SET kept = k.kept - x.n
		FROM (SELECT user_id, count(*) AS n FROM d GROUP BY user_id) x WHERE k.user_id = x.user_id`, over, excess)
	return err
}

// notifyMentioned logs the notifications an edit of m causes: the
// accounts it mentions that it never notified before (model.Notified).
func (w *writeTx) notifyMentioned(ctx context.Context, m *model.Message) error {
	if len(m.Mentions) == 0 {
		return nil
	}
	rows, err := w.Query(ctx, `SELECT user_id FROM notifications WHERE message_id = $1`, int64(m.ID))
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return err
	}
	already := func(id uint64) bool { return slices.Contains(ids, int64(id)) }
	ns := model.Notified(m.OwnerID, m.Mentions, 0, already)
	if err := w.keepNotifications(ctx, ns); err != nil {
		return err
	}
	for _, n := range ns {
		n.MessageID, n.Actor = m.ID, model.Profile{ID: m.OwnerID, Handle: m.OwnerHandle, Name: m.OwnerName}
		w.changes = append(w.changes, &model.Change{Kind: model.NotificationCreated, UserID: n.UserID, Notification: &n})
	}
	return nil
}

// postRow is a message a post creates in the last round trip of its
// batch's transaction, with the notifications it causes.
type postRow struct {
	m        *model.Message // ID, times filled by finishPosts
	terms    []string
	notified []model.Notification
	key      *model.IdempotencyKey
}

// postsSQL is the last statement of a batch of posts: it takes from the
// counter an ID and the creation time for each message, and a position
// for each message's change and for each of its notifications' after it,
// inserts them, the notifications and the keys' records, and notifies
// the other instances. $1 is the number of changes, $2 of messages, $3
// the time; the messages' fields follow as arrays: $4 the authors, $5
// their e-mails, $6 the contents, $7 and $8 where each message's terms
// start and end in $9, all their terms end to end, $10 reply_to, $11
// mentions, $12 the position of each message's change among the batch's
// (from 1), $13 and $14 the Idempotency-Keys' hashes and fingerprints
// (NULL for a post without one); then the notifications': $15 the
// message each is about (its index in the messages, from 1), $16 the
// account notified, $17 why, $18 its position.
var postsSQL = `
WITH c AS (
	UPDATE change_counter SET seq = seq + $1, message_id = message_id + $2, message_created = greatest(message_created, $3)
	RETURNING seq, message_id, message_created
), x AS (
	SELECT * FROM unnest($4::bigint[], $5::text[], $6::bytea[], $7::int[], $8::int[], $10::bigint[], $11::text[], $12::int[],
		$13::bytea[], $14::bytea[])
		WITH ORDINALITY AS x(owner_id, email, content, lo, hi, reply_to, mentions, pos, key, fingerprint, n)
), y AS (
	SELECT * FROM unnest($15::int[], $16::bigint[], $17::smallint[], $18::int[]) AS y(post, user_id, kind, pos)
), m AS (
	INSERT INTO messages (id, owner_id, content, terms, created_at, updated_at, revision, reply_to, mentions)
	SELECT c.message_id - $2 + x.n, x.owner_id, x.content, ($9::text[])[x.lo:x.hi], c.message_created, c.message_created, 1,
		x.reply_to, x.mentions::jsonb
	FROM c, x
), ch AS (
	INSERT INTO changes (seq, kind, at, user_id, message_id, owner_email, content, created_at, updated_at, revision,
		reply_to, mentions)
	SELECT c.seq - $1 + x.pos, ` + strconv.Itoa(int(model.MessageCreated)) + `, $3, x.owner_id, c.message_id - $2 + x.n, x.email,
		x.content, c.message_created, c.message_created, 1, x.reply_to, x.mentions::jsonb
	FROM c, x
), nc AS (
	INSERT INTO changes (seq, kind, at, user_id, message_id, owner_email, content, created_at, updated_at, revision)
	SELECT c.seq - $1 + y.pos, ` + strconv.Itoa(int(model.NotificationCreated)) + `, $3, y.user_id, c.message_id - $2 + y.post,
		'', NULL, NULL, NULL, 0
	FROM c, y
), nn AS (
	INSERT INTO notifications (id, user_id, kind, at, actor_id, message_id)
	SELECT c.seq - $1 + y.pos, y.user_id, y.kind, $3, x.owner_id, c.message_id - $2 + y.post
	FROM c, y JOIN x ON x.n = y.post
), ik AS (
	INSERT INTO idempotency_keys (user_id, key, fingerprint, message_id, created_at)
	SELECT x.owner_id, x.key, x.fingerprint, c.message_id - $2 + x.n, c.message_created
	FROM c, x WHERE x.key IS NOT NULL
)
SELECT c.seq, c.message_id, c.message_created, pg_notify('` + notifyChannel + `', c.seq || ':' || c.message_id) FROM c`

// maxPostBatch bounds the posts of one transaction: each is a few round
// trips, and the batch holds its locks until all are done.
const maxPostBatch = 64

// commitPosts writes a batch of posts, whose keys are distinct, and
// answers each of them.
func (db *DB) commitPosts(ctx context.Context, batch []*createOp) {
	if len(batch) == 1 {
		m, err := db.postAlone(ctx, batch[0])
		batch[0].done <- createResult{m, err}
		return
	}
	var results []createResult
	err := db.writeRetried(ctx, func(w *writeTx) error {
		var err error
		results, err = w.postAll(ctx, batch)
		return err
	})
	if err == nil {
		for i, op := range batch {
			op.done <- results[i]
		}
		return
	}
	// As commitDistinct: rolled back, each goes on its own; otherwise
	// the batch may have committed, and each gets the error.
	sendAgain := rolledBack(err)
	for _, op := range batch {
		if !sendAgain {
			op.done <- createResult{nil, err}
			continue
		}
		m, err := db.postAlone(ctx, op)
		op.done <- createResult{m, err}
	}
}

// postAlone writes one post in a transaction of its own.
func (db *DB) postAlone(ctx context.Context, op *createOp) (*model.Message, error) {
	for attempt := 1; ; attempt++ {
		var result createResult
		err := db.writeRetried(ctx, func(w *writeTx) error {
			results, err := w.postAll(ctx, []*createOp{op})
			if err == nil {
				result = results[0]
			}
			return err
		})
		if err == nil {
			return result.m, result.err
		}
		// Another create with the key committed since this one looked
		// for it, or a record past its window is in the way: as
		// createMessage does.
		if op.key != nil && attempt < maxWriteAttempts && uniqueViolation(err, "idempotency_keys_pkey") {
			if err = db.dropDeadKey(ctx, op.key); err != nil {
				return nil, err
			}
			continue
		}
		return nil, err
	}
}

// postAll is a batch's transaction up to its last round trip, which
// finishPosts sends: it answers each post of ops with the message to be
// created, the first answer a retry with its key gets, or its refusal.
// It fails only when the transaction does. Its statements go in a few
// pipelines, whatever the batch's size: every caller and every post's
// mentions; the keys' records; the replies counted, in the order of the
// messages answered; the marks.
func (w *writeTx) postAll(ctx context.Context, ops []*createOp) ([]createResult, error) {
	w.posts = w.posts[:0]
	results := make([]createResult, len(ops))
	users := make([]*model.User, len(ops))
	mentions := make([][]model.Mention, len(ops))
	b := &pgx.Batch{}
	callers := make([]resolver, len(ops))
	candidates := make([][]string, len(ops))
	var handles []string
	for i, op := range ops {
		callers[i] = w.db.queueWriteCaller(b, op.by)
		if strings.IndexByte(op.content, '@') >= 0 {
			candidates[i] = model.MentionedHandles(op.content)
			handles = append(handles, candidates[i]...)
		}
	}
	if len(handles) > 0 {
		slices.Sort(handles)
		b.Queue(batchMentionsSQL, slices.Compact(handles))
	}
	err := w.pipeline(ctx, b, func(br pgx.BatchResults) error {
		for i := range ops {
			var err error
			if users[i], err = callers[i](br); err != nil && !refusal(err) {
				return err
			}
			if err == nil && users[i] == nil {
				err = model.AccountNeeded() // the server's own caller: never queued
			}
			results[i].err = err
		}
		if len(handles) == 0 {
			return nil
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		found, err := collectHandles(rows)
		if err != nil {
			return err
		}
		for i := range ops {
			mentions[i] = inOrder(candidates[i], found)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var keyed, replies []int
	for i, op := range ops {
		switch {
		case results[i].err != nil:
		case op.key != nil:
			keyed = append(keyed, i)
		case op.replyTo != 0:
			replies = append(replies, i)
		}
	}
	for _, i := range keyed {
		replay, err := w.findKey(ctx, users[i], ops[i], mentions[i])
		switch {
		case err != nil && !refusal(err):
			return nil, err
		case err != nil:
			results[i].err = err
		case replay != nil:
			results[i].m = replay
		case ops[i].replyTo != 0:
			replies = append(replies, i)
		}
	}
	parentOwners := make([]uint64, len(ops))
	if len(replies) > 0 {
		slices.SortStableFunc(replies, func(a, b int) int { return cmp.Compare(ops[a].replyTo, ops[b].replyTo) })
		b := &pgx.Batch{}
		for _, i := range replies {
			b.Queue(countReplySQL, int64(ops[i].replyTo))
		}
		err := w.pipeline(ctx, b, func(br pgx.BatchResults) error {
			for _, i := range replies {
				var owner int64
				err := br.QueryRow().Scan(&owner)
				switch {
				case errors.Is(err, pgx.ErrNoRows):
					results[i].err = model.ReplyToNotFound(ops[i].replyTo)
				case err != nil:
					return err
				default:
					parentOwners[i] = uint64(owner)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var notified []model.Notification
	for i, op := range ops {
		u := users[i]
		if results[i].err != nil || results[i].m != nil {
			continue // refused, or a replay
		}
		m := &model.Message{OwnerID: u.ID, OwnerEmail: u.Email, OwnerHandle: u.Handle, OwnerName: u.Name,
			Content: op.content, ReplyTo: op.replyTo, Mentions: mentions[i], Revision: 1}
		p := &postRow{m: m, terms: op.terms, notified: model.Notified(u.ID, m.Mentions, parentOwners[i], nil), key: op.key}
		w.posts = append(w.posts, p)
		notified = append(notified, p.notified...)
		results[i].m = m
	}
	if err := w.keepNotifications(ctx, notified); err != nil {
		return nil, err
	}
	return results, nil
}

// refusal reports whether err is the store's answer to a request, which
// leaves the transaction as it was, rather than a failure of it.
func refusal(err error) bool {
	var (
		invalid *model.ValidationError
		refused *model.Error
	)
	return errors.As(err, &invalid) || errors.As(err, &refused) && refused.Cause == nil
}

// findKey looks for u's live record of op's Idempotency-Key and returns
// the first answer it records, rebuilt with op's content, which mentions
// mentions; nil when there is none.
func (w *writeTx) findKey(ctx context.Context, u *model.User, op *createOp, mentions []model.Mention) (*model.Message, error) {
	var found foundKey
	err := w.QueryRow(ctx, `SELECT fingerprint, message_id, created_at FROM idempotency_keys
		WHERE user_id = $1 AND key = $2 AND created_at > $3`,
		int64(u.ID), op.key.ID[:], w.db.clock().Add(-model.IdempotencyWindow)).Scan(&found.fingerprint, &found.messageID, &found.createdAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m, err := found.replayDraft(*op.key, u, model.Draft{Content: op.content, ReplyTo: op.replyTo})
	if err != nil {
		return nil, err
	}
	m.Mentions = mentions
	return m, nil
}

// countReplySQL counts one more reply for message $1 and answers its
// owner, whose account it first locks against deletion (the owner is
// notified); no row when the message does not exist.
const countReplySQL = `WITH o AS (
	SELECT u.id FROM messages p JOIN users u ON u.id = p.owner_id WHERE p.id = $1 FOR KEY SHARE OF u
)
UPDATE messages SET replies = replies + 1 WHERE id = $1 AND EXISTS (SELECT 1 FROM o) RETURNING owner_id`

// finishPosts sends postsSQL and COMMIT in one round trip, and returns
// the newest position it took.
func (w *writeTx) finishPosts(ctx context.Context) (uint64, error) {
	at := w.db.clock()
	n := len(w.posts)
	owners := make([]int64, n)
	emails := make([]string, n)
	contents := make([][]byte, n)
	los := make([]int32, n)
	his := make([]int32, n)
	var terms []string
	replyTos := make([]*int64, n)
	mentions := make([]*string, n)
	positions := make([]int32, n)
	keys := make([][]byte, n)
	fingerprints := make([][]byte, n)
	var notePosts, noteUsers []int64
	var noteKinds []int16
	var notePositions []int32
	pos := int32(0)
	for i, p := range w.posts {
		m := p.m
		owners[i], emails[i], contents[i] = int64(m.OwnerID), m.OwnerEmail, []byte(m.Content)
		los[i] = int32(len(terms) + 1)
		terms = append(terms, p.terms...)
		his[i] = int32(len(terms))
		replyTos[i], mentions[i] = replyToArg(m.ReplyTo), mentionsJSON(m.Mentions)
		if p.key != nil {
			keys[i], fingerprints[i] = p.key.ID[:], p.key.Fingerprint[:]
		}
		pos++
		positions[i] = pos
		for _, nt := range p.notified {
			pos++
			notePosts, noteUsers = append(notePosts, int64(i+1)), append(noteUsers, int64(nt.UserID))
			noteKinds, notePositions = append(noteKinds, int16(nt.Kind)), append(notePositions, pos)
		}
	}
	if terms == nil {
		terms = []string{}
	}
	var (
		head, lastID int64
		created      time.Time
	)
	args := []any{pos, n, at, owners, emails, contents, los, his, terms, replyTos, mentions, positions, keys, fingerprints,
		notePosts, noteUsers, noteKinds, notePositions}
	if err := w.commitWith(ctx, postsSQL, args, &head, &lastID, &created, nil); err != nil {
		return 0, err
	}
	// The messages' changes, for the feed; the notifications' changes are
	// never scrubbed, and are read from the log.
	first, firstID := uint64(head)-uint64(pos), uint64(lastID)-uint64(n)
	w.changes = w.changes[:0]
	for i, p := range w.posts {
		m := p.m
		m.ID = firstID + uint64(i) + 1
		m.CreatedAt = created.UTC()
		m.UpdatedAt = m.CreatedAt
		w.changes = append(w.changes, &model.Change{Seq: first + uint64(positions[i]), Kind: model.MessageCreated, At: at, Message: *m})
	}
	w.db.feed.sawMessage(uint64(lastID))
	return uint64(head), nil
}

// messagePageColumns reads a message without its owner, whom fillOwners
// fills: id, owner_id, content, created_at, updated_at, revision,
// reply_to (0 for none), replies, mentions (NULL for none).
const messagePageColumns = `m.id, m.owner_id, m.content, m.created_at, m.updated_at, m.revision,
	coalesce(m.reply_to, 0), m.replies, m.mentions::text`

// pageMessage is a row of messagePageColumns as scanWire reads it.
type pageMessage struct {
	id, owner, rev, replyTo, replies int64
	content                          byteaString
	created, updated                 *time.Time
	mentions                         *string
}

func (r *pageMessage) dest() []any {
	return []any{&r.id, &r.owner, &r.content, &r.created, &r.updated, &r.rev, &r.replyTo, &r.replies, &r.mentions}
}

func (r *pageMessage) message(m *model.Message) error {
	*m = model.Message{ID: uint64(r.id), OwnerID: uint64(r.owner), Content: string(r.content),
		CreatedAt: r.created.UTC(), UpdatedAt: r.updated.UTC(), Revision: uint64(r.rev),
		ReplyTo: uint64(r.replyTo), Replies: uint64(r.replies)}
	var err error
	m.Mentions, err = parseMentions(r.mentions)
	return err
}

// Replies returns a page of the replies to q.MessageID, oldest first,
// read together with other reads. Errors: model.ErrUnauthorized,
// model.ErrNotFound when the message does not exist and never did.
func (db *DB) Replies(ctx context.Context, by model.Caller, q model.RepliesQuery) (_ *model.RepliesPage, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	limit := q.Limit
	if limit <= 0 {
		limit = model.DefaultSearchLimit
	}
	if q.MessageID > math.MaxInt64 {
		q.MessageID = 0 // never given out
	}
	after := int64(min(q.AfterID, math.MaxInt64))
	var (
		resolve resolver
		known   bool
		msgs    []*model.Message
	)
	err = db.readTogether(ctx, func(b *pgx.Batch) {
		resolve = db.queueCaller(b, by)
		// Given out, so it exists or existed.
		b.Queue(`SELECT $1::bigint BETWEEN 1 AND message_id FROM change_counter`, int64(q.MessageID))
		b.Queue(`SELECT `+messagePageColumns+` FROM messages m WHERE m.reply_to = $1 AND m.id > $2 ORDER BY m.id LIMIT $3`,
			int64(q.MessageID), after, limit+1)
	}, func(br pgx.BatchResults) error {
		msgs = nil
		if _, err := resolve(br); err != nil {
			return err
		}
		if err := br.QueryRow().Scan(&known); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		var r pageMessage
		for rows.Next() {
			if err := scanWire(rows, r.dest()...); err != nil {
				return err
			}
			m := new(model.Message)
			if err := r.message(m); err != nil {
				return err
			}
			msgs = append(msgs, m)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	if !known {
		return nil, model.MessageNotFound(q.MessageID)
	}
	page := &model.RepliesPage{}
	if len(msgs) > limit {
		msgs = msgs[:limit]
		page.NextAfterID = msgs[limit-1].ID
	}
	// A reply whose account's deletion removed it since the page was
	// read is left out, as bolt leaves out one being removed.
	if page.Messages, err = db.fillOwners(ctx, msgs); err != nil {
		return nil, err
	}
	return page, nil
}

// notificationColumns reads a notification (n) with its actor (a), who
// is its message's owner, its message (m, NULL once deleted) and the
// mark (k): id, kind, at, actor_id, e-mail, handle and name, message_id,
// read, then the message's columns.
const notificationColumns = `n.id, n.kind, n.at, n.actor_id, a.email, a.handle, a.name, n.message_id,
	n.id <= coalesce(k.read_up_to, 0), m.id IS NOT NULL, m.content, m.created_at, m.updated_at, coalesce(m.revision, 0),
	coalesce(m.reply_to, 0), coalesce(m.replies, 0), m.mentions::text`

// scanNotification reads a row of notificationColumns.
func scanNotification(row pgx.Row, userID uint64) (*model.Notification, error) {
	var (
		id, actor, messageID, rev, replyTo, replies int64
		kind                                        int16
		at                                          time.Time
		email                                       string
		read, has                                   bool
		content                                     []byte
		created, updated                            *time.Time
		mentions                                    *string
	)
	n := &model.Notification{UserID: userID}
	if err := row.Scan(&id, &kind, &at, &actor, &email, &n.Actor.Handle, &n.Actor.Name, &messageID, &read,
		&has, &content, &created, &updated, &rev, &replyTo, &replies, &mentions); err != nil {
		return nil, err
	}
	n.ID, n.Kind, n.At, n.Actor.ID, n.MessageID, n.Read = uint64(id), model.NotificationKind(kind), at.UTC(), uint64(actor), uint64(messageID), read
	if has {
		m := &model.Message{ID: n.MessageID, OwnerID: n.Actor.ID, OwnerEmail: email, OwnerHandle: n.Actor.Handle,
			OwnerName: n.Actor.Name, Content: string(content), CreatedAt: created.UTC(), UpdatedAt: updated.UTC(),
			Revision: uint64(rev), ReplyTo: uint64(replyTo), Replies: uint64(replies)}
		var err error
		if m.Mentions, err = parseMentions(mentions); err != nil {
			return nil, err
		}
		n.Message = m
	}
	return n, nil
}

// Notifications returns a page of the caller's notifications, newest
// first, with the number unread; those whose actor is suspended or gone
// are neither listed nor counted. It is read in one round trip, sent
// together with other reads. Errors: model.ErrUnauthorized.
func (db *DB) Notifications(ctx context.Context, by model.Caller, q model.NotificationQuery) (_ *model.NotificationPage, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	if by.Server() {
		return nil, model.AccountNeeded()
	}
	limit := q.Limit
	if limit <= 0 {
		limit = model.DefaultNotificationsLimit
	}
	before := int64(math.MaxInt64)
	if q.BeforeID != 0 && q.BeforeID < math.MaxInt64 {
		before = int64(q.BeforeID)
	}
	// The caller's account, for the statements sent with its resolution.
	who, whoArg := "$1::bigint", any(int64(by.UserID()))
	if hash, ok := by.Token(); ok {
		who, whoArg = "(SELECT user_id FROM tokens WHERE hash = $1)", hash[:]
	}
	var (
		resolve resolver
		u       *model.User
		page    model.NotificationPage
	)
	err = db.readTogether(ctx, func(b *pgx.Batch) {
		resolve = db.queueCaller(b, by)
		b.Queue(`SELECT `+notificationColumns+` FROM notifications n
			JOIN users a ON a.id = n.actor_id AND NOT a.suspended
			LEFT JOIN notification_marks k ON k.user_id = n.user_id
			LEFT JOIN messages m ON m.id = n.message_id
			WHERE n.user_id = `+who+` AND n.id < $2 AND (NOT $3 OR n.id > coalesce(k.read_up_to, 0))
			ORDER BY n.id DESC LIMIT $4`, whoArg, before, q.Unread, limit+1)
		b.Queue(`SELECT count(*) FROM notifications n JOIN users a ON a.id = n.actor_id AND NOT a.suspended
			WHERE n.user_id = `+who+` AND n.id > coalesce((SELECT read_up_to FROM notification_marks WHERE user_id = `+who+`), 0)`,
			whoArg)
	}, func(br pgx.BatchResults) error {
		page = model.NotificationPage{}
		var err error
		if u, err = resolve(br); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			n, err := scanNotification(rows, u.ID)
			if err != nil {
				rows.Close()
				return err
			}
			page.Items = append(page.Items, n)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		return br.QueryRow().Scan(&page.Unread)
	})
	if err != nil {
		return nil, err
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		page.NextBeforeID = page.Items[limit-1].ID
	}
	return &page, nil
}

// MarkNotificationsRead marks the caller's notifications up to and
// including upTo read, or all of them when upTo is zero; a mark never
// moves back. Errors: model.ErrUnauthorized.
func (db *DB) MarkNotificationsRead(ctx context.Context, by model.Caller, upTo uint64) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	return db.write(ctx, func(w *writeTx) error {
		u, err := w.caller(ctx, by)
		if err != nil {
			return err
		}
		mark := any(int64(min(upTo, math.MaxInt64)))
		if upTo == 0 {
			mark = nil // the newest the account has
		}
		_, err = w.Exec(ctx, `INSERT INTO notification_marks AS k (user_id, read_up_to)
			SELECT $1, v FROM (SELECT coalesce($2::bigint, (SELECT max(id) FROM notifications WHERE user_id = $1)) AS v) x
			WHERE v IS NOT NULL
			ON CONFLICT (user_id) DO UPDATE SET read_up_to = greatest(k.read_up_to, excluded.read_up_to)`,
			int64(u.ID), mark)
		return err
	})
}

// TrimNotifications removes notifications older than keepFor, trimChunk
// per statement, and returns how many it removed.
func (db *DB) TrimNotifications(ctx context.Context, keepFor time.Duration) (int, error) {
	if keepFor <= 0 {
		return 0, nil
	}
	removed := 0
	for {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		var (
			n   int
			err error
		)
		for attempt := 1; attempt <= maxWriteAttempts; attempt++ {
			// The marks' counts go down in the statement that deletes: a
			// notification the cap deletes at once (keepNotifications) is
			// counted by whichever deletes it. The two may deadlock on an
			// account at its cap; PostgreSQL ends one, and this one goes
			// again.
			err = db.pool.QueryRow(ctx, `WITH d AS (
					DELETE FROM notifications WHERE id IN (SELECT id FROM notifications WHERE at < $1 LIMIT $2)
					RETURNING user_id
				), k AS (
					UPDATE notification_marks k SET kept = k.kept - x.n
					FROM (SELECT user_id, count(*) AS n FROM d GROUP BY user_id) x WHERE k.user_id = x.user_id
				)
				SELECT count(*) FROM d`, db.clock().Add(-keepFor), trimChunk).Scan(&n)
			if !retryable(err) {
				break
			}
		}
		if err != nil {
			return removed, err
		}
		removed += n
		if n < trimChunk {
			return removed, nil
		}
	}
}
