package pg

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// The change log. Every create, update and delete of a message, and every
// revocation of tokens, is a row of the changes table written in the
// transaction that makes it, so a change is in the log if and only if it
// committed. Positions must be dense and in commit order, whichever
// instance wrote them: a stream resumes after a position on any instance,
// and must neither skip nor repeat.
//
// A sequence (bigserial) gives neither: numbers are taken when a
// transaction asks, not when it commits, so a reader that has seen
// position 8 may later find 7 commit, and a number taken by a transaction
// that rolls back is never filled. Instead every logging transaction ends
// by updating the one row of change_counter, adding as many positions as
// it logs changes. That row's lock is held to the commit, so the next
// logging transaction takes its positions only after this one committed:
// positions rise in commit order, with no holes, and a reader that sees
// the counter at N sees every change up to N.
//
// Instances learn of new changes three ways: their own commits, a
// notification each logging transaction sends on commit (LISTEN on a
// connection of its own), and a poll of the counter every PollEvery. The
// table is the truth; the wake-ups only save waiting. A notification lost
// (a dropped connection, say) costs at most one poll's delay, never a
// change.

// notifyChannel is the channel logging transactions notify, with the new
// head and the newest message ID given out as the payload ("head:id").
const notifyChannel = "herald_changes"

// feed is what this instance knows of the log's head, and the channel that
// wakes its readers when the head moves. It also knows the newest message
// ID given out, which search starts its windows from, and the changes this
// instance committed last, as they committed (see RecentChangesAfter).
type feed struct {
	mu      sync.Mutex
	head    uint64
	wait    chan struct{}
	message atomic.Uint64

	// committed holds the changes of messages this instance committed
	// last, by position, oldest first in order: at most feedMemory of
	// them, about feedMemoryBytes of content.
	committed map[uint64]*model.Change
	order     []uint64
	bytes     int
}

// The feed keeps this instance's newest changes in memory, at most
// feedMemory of them and about feedMemoryBytes of content: its live
// streams are rendered within moments of a commit.
const (
	feedMemory      = 4096
	feedMemoryBytes = 8 << 20
)

// keep notes changes this instance committed, their positions given.
func (f *feed) keep(chs ...*model.Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.committed == nil {
		f.committed = make(map[uint64]*model.Change)
	}
	for _, ch := range chs {
		if ch.Kind.Internal() || ch.Kind == model.MessageDeleted || ch.Kind == model.NotificationCreated {
			continue // nothing a scrub takes from them
		}
		f.committed[ch.Seq] = ch
		f.order = append(f.order, ch.Seq)
		f.bytes += model.ChangeBytes(ch)
	}
	drop := 0
	for len(f.order)-drop > 1 && (len(f.order)-drop > feedMemory || f.bytes > feedMemoryBytes) {
		f.bytes -= model.ChangeBytes(f.committed[f.order[drop]])
		delete(f.committed, f.order[drop])
		drop++
	}
	f.order = append(f.order[:0], f.order[drop:]...)
}

// asCommitted returns the change at position seq as this instance
// committed it, nil when it did not or has forgotten it.
func (f *feed) asCommitted(seq uint64) *model.Change {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.committed[seq]
}

// advance moves the head to at least head, waking readers if it moved.
func (f *feed) advance(head uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if head <= f.head {
		return
	}
	f.head = head
	close(f.wait)
	f.wait = make(chan struct{})
}

// sawMessage notes that message IDs up to id have been given out.
func (f *feed) sawMessage(id uint64) {
	for {
		cur := f.message.Load()
		if id <= cur || f.message.CompareAndSwap(cur, id) {
			return
		}
	}
}

// newestMessage is the newest message ID this instance knows was given
// out; another instance may have given out newer ones since.
func (f *feed) newestMessage() uint64 { return f.message.Load() }

// current is the head as this instance knows it and its wake-up channel.
func (f *feed) current() (uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.head, f.wait
}

// startFeed reads the head and starts the listener and the poller.
func (db *DB) startFeed(ctx context.Context, pollEvery time.Duration) error {
	db.feed.wait = make(chan struct{})
	if _, _, err := db.readHead(ctx); err != nil {
		return err
	}
	db.workers.Add(2)
	go db.listen()
	go db.poll(pollEvery)
	return nil
}

// readHead reads the counter and the floor, and advances the feed.
func (db *DB) readHead(ctx context.Context) (head, floor uint64, err error) {
	var h, f, m int64
	err = db.pool.QueryRow(ctx, `SELECT c.seq, f.seq, c.message_id FROM change_counter c CROSS JOIN change_floor f`).Scan(&h, &f, &m)
	if err == nil {
		db.feed.sawMessage(uint64(m))
		db.feed.advance(uint64(h))
	}
	return uint64(h), uint64(f), err
}

// poll reads the head every interval, in case a notification was lost.
func (db *DB) poll(interval time.Duration) {
	defer db.workers.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-db.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), interval)
		_, _, _ = db.readHead(ctx) // a failure waits for the next tick
		cancel()
	}
}

// listenRetry is the wait before the listener reconnects after losing its
// connection; the poller covers the gap.
const listenRetry = time.Second

// listen holds a connection of its own LISTENing on notifyChannel, and
// advances the head with every notification, and on ownersChannel, and
// forgets the owner each names; it reconnects when the connection is lost.
func (db *DB) listen() {
	defer db.workers.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-db.stop
		cancel()
	}()
	cfg := db.ownConnConfig()
	for ctx.Err() == nil {
		err := db.listenOnce(ctx, cfg)
		if ctx.Err() != nil {
			return
		}
		db.log.Warn("listening for changes from other instances; reconnecting", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(listenRetry):
		}
	}
}

func (db *DB) listenOnce(ctx context.Context, cfg *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	for _, channel := range []string{notifyChannel, ownersChannel} {
		if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
			return err
		}
	}
	// Whatever committed while no one listened: a handle or a name may
	// have changed unheard.
	db.owners.forgetAll()
	var head, message int64
	if err := conn.QueryRow(ctx, "SELECT seq, message_id FROM change_counter").Scan(&head, &message); err != nil {
		return err
	}
	db.feed.sawMessage(uint64(message))
	db.feed.advance(uint64(head))
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel == ownersChannel {
			db.heardOwner(n.Payload)
			continue
		}
		seq, id, _ := strings.Cut(n.Payload, ":")
		if v, err := strconv.ParseUint(id, 10, 64); err == nil {
			db.feed.sawMessage(v)
		}
		if v, err := strconv.ParseUint(seq, 10, 64); err == nil {
			db.feed.advance(v)
		}
	}
}

// ChangeHead returns the newest committed change's position (0 for an
// empty log) and a channel closed when a newer one commits, on any
// instance. The position is read from the database, not only from what
// this instance has heard: a client resuming here with a position another
// instance gave it must not be told that position does not exist.
func (db *DB) ChangeHead(ctx context.Context) (_ uint64, _ <-chan struct{}, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	var head, message int64
	if err := db.pool.QueryRow(ctx, "SELECT seq, message_id FROM change_counter").Scan(&head, &message); err != nil {
		h, wait := db.feed.current()
		return h, wait, err
	}
	db.feed.sawMessage(uint64(message))
	db.feed.advance(uint64(head))
	h, wait := db.feed.current()
	return h, wait, nil
}

// changesSQL reads the head, the floor and the changes after a position
// in one statement, so in one snapshot: every change up to the head it
// reads is committed and visible to it. A change of a message or a
// creation scrubbed since (its content NULL) is joined to the message as
// it is now, which it lacks when the message is gone; every change of a
// message comes with its owner's handle and name as they are now, and
// one of a message that stays with its replies counted now. A
// NotificationCreated change is joined to its notification (the same ID)
// as it is now, its actor and its message: gone when the notification
// is, or when its actor is gone or suspended. The changes stop at $2 of
// them, and before the one that would take their content beyond $3
// bytes, but for the first.
const changesSQL = `
SELECT h.seq, f.seq, c.seq, c.kind, c.at, c.user_id, c.message_id, c.owner_email, c.content, c.scrubbed, c.gone,
	c.created_at, c.updated_at, c.revision, c.reply_to, c.mentions, c.replies, c.handle, c.name,
	c.notification_kind, c.actor_id, c.has_message, c.read
FROM change_counter h CROSS JOIN change_floor f
LEFT JOIN LATERAL (
	SELECT y.*, sum(y.bytes) OVER (ORDER BY y.seq) AS upto, row_number() OVER (ORDER BY y.seq) AS n FROM (
		SELECT x.*, coalesce(octet_length(x.content), 0) + coalesce(octet_length(x.owner_email), 0) AS bytes FROM (
			SELECT c.seq, c.kind, c.at, c.user_id, c.message_id,
				CASE WHEN c.kind = 6 THEN o.email ELSE c.owner_email END AS owner_email,
				CASE WHEN c.kind = 6 THEN m.content WHEN c.content IS NULL AND c.kind IN (1, 2) THEN m.content ELSE c.content END AS content,
				c.content IS NULL AND c.kind IN (1, 2) AS scrubbed,
				CASE WHEN c.kind = 6 THEN nt.id IS NULL OR o.id IS NULL OR o.suspended
					ELSE c.content IS NULL AND c.kind IN (1, 2) AND m.id IS NULL END AS gone,
				CASE WHEN c.kind = 6 THEN m.created_at ELSE c.created_at END AS created_at,
				CASE WHEN c.kind = 6 THEN m.updated_at
					WHEN c.content IS NULL AND c.kind IN (1, 2) THEN coalesce(m.updated_at, c.updated_at) ELSE c.updated_at END AS updated_at,
				CASE WHEN c.kind = 6 THEN m.revision
					WHEN c.content IS NULL AND c.kind IN (1, 2) THEN coalesce(m.revision, c.revision) ELSE c.revision END AS revision,
				CASE WHEN c.kind = 6 THEN m.reply_to ELSE c.reply_to END AS reply_to,
				(CASE WHEN c.kind = 6 OR c.content IS NULL AND c.kind IN (1, 2) THEN m.mentions ELSE c.mentions END)::text AS mentions,
				m.replies, o.handle, o.name,
				nt.kind AS notification_kind, nt.actor_id, m.id IS NOT NULL AS has_message,
				nt.id <= coalesce(k.read_up_to, 0) AS read
			FROM changes c
			LEFT JOIN messages m ON c.kind IN (1, 2, 6) AND m.id = c.message_id
			LEFT JOIN notifications nt ON c.kind = 6 AND nt.id = c.seq
			LEFT JOIN users o ON o.id = CASE WHEN c.kind = 6 THEN nt.actor_id WHEN c.kind IN (1, 2, 3) THEN c.user_id END
			LEFT JOIN notification_marks k ON c.kind = 6 AND k.user_id = c.user_id
			WHERE c.seq > $1 AND c.seq <= h.seq AND $1 >= f.seq ORDER BY c.seq LIMIT $2
		) x
	) y
) c ON true
WHERE c.seq IS NULL OR c.n = 1 OR c.upto <= $3
ORDER BY c.seq`

// ChangesAfter returns up to max changes after position after, oldest
// first, and no more than about model.ChangeBatchBytes of them, and the
// head the read saw. A change of a message edited or deleted since comes
// scrubbed, with the message as it is now or Gone; a notification comes
// as it is now, or Gone. Errors: model.ErrChangeUnknown for a position
// the log no longer holds (trimmed away) or never held (beyond the head).
func (db *DB) ChangesAfter(ctx context.Context, after uint64, max int) (_ []*model.Change, _ uint64, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	if max <= 0 {
		max = 1
	}
	rows, err := db.pool.Query(ctx, changesSQL, int64(after), max, model.ChangeBatchBytes)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var (
		out         []*model.Change
		head, floor int64
	)
	for rows.Next() {
		var (
			seq, userID, messageID, revision *int64
			replyTo, replies, actor          *int64
			kind, notificationKind           *int16
			at, created, updated             *time.Time
			email, mentions, handle, name    *string
			content                          []byte
			scrubbed, gone, hasMessage, read *bool
		)
		if err := rows.Scan(&head, &floor, &seq, &kind, &at, &userID, &messageID, &email, &content, &scrubbed, &gone,
			&created, &updated, &revision, &replyTo, &mentions, &replies, &handle, &name,
			&notificationKind, &actor, &hasMessage, &read); err != nil {
			return nil, 0, err
		}
		if seq == nil {
			continue // no change after the position: the left join's empty row
		}
		ch := &model.Change{Seq: uint64(*seq), Kind: model.ChangeKind(*kind), At: at.UTC()}
		switch ch.Kind {
		case model.TokensRevoked:
			ch.UserID = uint64(*userID)
		case model.SettingsChanged:
		case model.MessageCreated, model.MessageUpdated, model.MessageDeleted:
			ch.Message = model.Message{
				ID: uint64(*messageID), OwnerID: uint64(*userID), OwnerEmail: *email,
				OwnerHandle: deref(handle), OwnerName: deref(name),
				Content: string(content), CreatedAt: created.UTC(), UpdatedAt: updated.UTC(),
				Revision: uint64(*revision), ReplyTo: uint64(derefInt(replyTo)),
			}
			ch.Scrubbed, ch.Gone = *scrubbed, *gone
			if ch.Kind != model.MessageDeleted && !ch.Gone {
				ch.Message.Replies = uint64(derefInt(replies))
			}
			if ch.Message.Mentions, err = parseMentions(mentions); err != nil {
				return nil, 0, err
			}
		case model.NotificationCreated:
			ch.UserID = uint64(*userID)
			n := &model.Notification{ID: ch.Seq, UserID: ch.UserID, At: ch.At, MessageID: uint64(*messageID)}
			ch.Notification, ch.Gone = n, *gone
			if notificationKind != nil { // its row stays: what it says, whoever reads it
				n.Kind, n.Actor.ID = model.NotificationKind(*notificationKind), uint64(*actor)
			}
			if ch.Gone {
				break
			}
			n.Read = *read
			n.Actor.Handle, n.Actor.Name = *handle, *name
			if *hasMessage {
				m := &model.Message{ID: n.MessageID, OwnerID: n.Actor.ID, OwnerEmail: *email, OwnerHandle: *handle,
					OwnerName: *name, Content: string(content), CreatedAt: created.UTC(), UpdatedAt: updated.UTC(),
					Revision: uint64(*revision), ReplyTo: uint64(derefInt(replyTo)), Replies: uint64(derefInt(replies))}
				if m.Mentions, err = parseMentions(mentions); err != nil {
					return nil, 0, err
				}
				n.Message = m
			}
		default:
			return nil, 0, errors.New("change " + strconv.FormatInt(*seq, 10) + " is of an unknown kind")
		}
		out = append(out, ch)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	db.feed.advance(uint64(head))
	if after < uint64(floor) || after > uint64(head) {
		return nil, uint64(head), model.ErrChangeUnknown
	}
	return out, uint64(head), nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}

// RecentChangesAfter is ChangesAfter, but the changes this instance
// committed and still holds in memory come as they committed, content
// edited away or deleted since included: what its live streams are sent,
// however late its hub renders them. (Another instance's live streams
// may be sent a change of a message as the message is now, when it was
// edited or deleted before they rendered it.)
func (db *DB) RecentChangesAfter(ctx context.Context, after uint64, max int) ([]*model.Change, uint64, error) {
	chs, head, err := db.ChangesAfter(ctx, after, max)
	bytes := 0
	for i, ch := range chs {
		if ch.Scrubbed {
			if c := db.feed.asCommitted(ch.Seq); c != nil && c.Kind == ch.Kind && c.Message.ID == ch.Message.ID {
				chs[i] = c
			}
		}
		// The content as committed may be more than the read counted.
		if bytes += model.ChangeBytes(chs[i]); i > 0 && bytes > model.ChangeBatchBytes {
			return chs[:i], head, err
		}
	}
	return chs, head, err
}

// trimChunk bounds the changes one trim transaction removes.
const trimChunk = 500

// TrimChanges removes changes older than keepFor, and the oldest beyond
// the newest keepMax, trimChunk per transaction, and returns how many it
// removed. A zero keepFor or keepMax leaves that bound off. Like bolt's,
// it trims only from the front: the log stays a contiguous run of
// positions after the floor.
func (db *DB) TrimChanges(ctx context.Context, keepFor time.Duration, keepMax int) (int, error) {
	removed := 0
	for {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		var n int
		err := db.write(ctx, func(w *writeTx) error {
			n = 0
			var head, floor int64
			// The floor's row lock keeps two trims from interleaving.
			if err := w.QueryRow(ctx, `SELECT (SELECT seq FROM change_counter), seq FROM change_floor FOR UPDATE`).Scan(&head, &floor); err != nil {
				return err
			}
			// Both bounds cut a run from the front; the longer run goes.
			cut := floor
			if keepMax > 0 {
				cut = max(cut, head-int64(keepMax))
			}
			if keepFor > 0 {
				cutoff := db.clock().Add(-keepFor)
				var firstKept *int64
				if err := w.QueryRow(ctx, `SELECT min(seq) FROM changes WHERE seq > $1 AND seq <= $2 AND at >= $3`,
					floor, floor+trimChunk, cutoff).Scan(&firstKept); err != nil {
					return err
				}
				byAge := floor + trimChunk
				if firstKept != nil {
					byAge = *firstKept - 1
				}
				cut = max(cut, byAge)
			}
			cut = min(cut, floor+trimChunk, head)
			if cut <= floor {
				return nil
			}
			tag, err := w.Exec(ctx, `DELETE FROM changes WHERE seq > $1 AND seq <= $2`, floor, cut)
			if err != nil {
				return err
			}
			if _, err := w.Exec(ctx, `UPDATE change_floor SET seq = $1`, cut); err != nil {
				return err
			}
			n = rowsAffected(tag)
			return nil
		})
		if err != nil {
			return removed, err
		}
		removed += n
		if n < trimChunk {
			return removed, nil
		}
	}
}
