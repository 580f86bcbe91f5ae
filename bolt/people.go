package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// People: replies, mentions and notifications. A reply is a message whose
// record names the message it answers; the replies bucket lists each
// message's answers in ID order, which is commit order, so a page of them
// resumes after the last ID it showed and never skips or repeats one. A
// notification is written in the transaction of the message that causes
// it, with a change in the log whose position is the notification's ID.

var (
	// parentID‖replyID → nil: the replies to each message, deleted or not
	bucketReplies = []byte("replies")
	// messageID → the number of replies it has (8 bytes), when it has any
	bucketReplyCounts = []byte("reply_counts")
	// userID‖notificationID → notification record
	bucketNotifications = []byte("notifications")
	// messageID → the accounts it notified and that still keep the
	// notification (8 bytes each), so an edit notifies only the accounts
	// it newly mentions: one record a message, as PostgreSQL finds it
	// among the notifications themselves
	bucketNotified = []byte("notified")
	// userID → read-up-to notification ID‖number of notifications kept
	bucketNotificationMarks = []byte("notification_marks")
)

func pairKey(a, b uint64) []byte {
	k := make([]byte, 16)
	binary.BigEndian.PutUint64(k, a)
	binary.BigEndian.PutUint64(k[8:], b)
	return k
}

// notification records: kind (1 byte), time (8, Unix microseconds), actor
// (8), message (8).
const notificationRecordLen = 1 + 8 + 8 + 8

func encodeNotification(n *model.Notification) []byte {
	b := make([]byte, 0, notificationRecordLen)
	b = append(b, byte(n.Kind))
	b = binary.BigEndian.AppendUint64(b, uint64(timeToMicros(n.At)))
	b = binary.BigEndian.AppendUint64(b, n.Actor.ID)
	return binary.BigEndian.AppendUint64(b, n.MessageID)
}

func decodeNotification(userID, id uint64, b []byte) (*model.Notification, error) {
	if len(b) != notificationRecordLen || b[0] != byte(model.NotifyMention) && b[0] != byte(model.NotifyReply) {
		return nil, fmt.Errorf("decode notification %d: bad record", id)
	}
	return &model.Notification{
		ID: id, UserID: userID, Kind: model.NotificationKind(b[0]),
		At:        microsToTime(int64(binary.BigEndian.Uint64(b[1:]))),
		Actor:     model.Profile{ID: binary.BigEndian.Uint64(b[9:])},
		MessageID: binary.BigEndian.Uint64(b[17:]),
	}, nil
}

// notificationMarks is an account's read-up-to ID and how many
// notifications it keeps.
type notificationMarks struct{ readUpTo, kept uint64 }

func readMarks(tx *bbolt.Tx, userID uint64) notificationMarks {
	return readMarksIn(tx.Bucket(bucketNotificationMarks), userID)
}

func readMarksIn(marks *bbolt.Bucket, userID uint64) notificationMarks {
	v := marks.Get(itob(userID))
	if len(v) != 16 {
		return notificationMarks{}
	}
	return notificationMarks{btoi(v[:8]), btoi(v[8:])}
}

func writeMarks(tx *bbolt.Tx, userID uint64, m notificationMarks) error {
	return tx.Bucket(bucketNotificationMarks).Put(itob(userID), pairKey(m.readUpTo, m.kept))
}

// resolveMentions turns the @handles of content into the accounts they
// name, the first model.MaxMentions that exist. An edit passes the
// message's mentions before it as kept: a handle the content still spells
// keeps naming the account it named when it was written, whoever holds
// the handle now, so a handle given up and taken by someone else never
// brings them what was written to its earlier holder.
func resolveMentions(tx *bbolt.Tx, content string, kept []model.Mention) []model.Mention {
	var out []model.Mention
	byHandle, users := tx.Bucket(bucketUsersByHandle), tx.Bucket(bucketUsers)
	for _, h := range model.MentionedHandles(content) {
		if i := slices.IndexFunc(kept, func(m model.Mention) bool { return m.Handle == h }); i >= 0 {
			if users.Get(itob(kept[i].UserID)) != nil {
				out = append(out, kept[i])
			}
		} else if id := byHandle.Get([]byte(h)); len(id) == 8 {
			out = append(out, model.Mention{UserID: btoi(id), Handle: h})
		}
		if len(out) == model.MaxMentions {
			break
		}
	}
	return out
}

// addReply files message m as a reply to m.ReplyTo, which must exist, and
// returns the owner of the message it answers.
func addReply(tx *bbolt.Tx, m *model.Message) (parentOwner uint64, err error) {
	rec := tx.Bucket(bucketMessages).Get(itob(m.ReplyTo))
	if len(rec) < messageHeaderLen {
		return 0, model.ReplyToNotFound(m.ReplyTo)
	}
	if err := tx.Bucket(bucketReplies).Put(pairKey(m.ReplyTo, m.ID), nil); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(rec[1:]), countReplies(tx, m.ReplyTo, +1)
}

// removeReply takes a deleted message m out of the replies of the message
// it answered.
func removeReply(tx *bbolt.Tx, m *model.Message) error {
	if m.ReplyTo == 0 {
		return nil
	}
	if err := tx.Bucket(bucketReplies).Delete(pairKey(m.ReplyTo, m.ID)); err != nil {
		return err
	}
	return countReplies(tx, m.ReplyTo, -1)
}

func countReplies(tx *bbolt.Tx, id uint64, delta int) error {
	counts := tx.Bucket(bucketReplyCounts)
	n := uint64(0)
	if v := counts.Get(itob(id)); len(v) == 8 {
		n = btoi(v)
	}
	n = uint64(int64(n) + int64(delta))
	if n == 0 {
		return counts.Delete(itob(id))
	}
	return counts.Put(itob(id), itob(n))
}

// joinReplies fills m.Replies.
func joinReplies(tx *bbolt.Tx, m *model.Message) {
	joinRepliesIn(tx.Bucket(bucketReplyCounts), m)
}

// joinRepliesIn is joinReplies with the reply_counts bucket looked up
// once for a page, not once a message: looking a bucket up walks the
// root's tree, which showed in a page's time.
func joinRepliesIn(counts *bbolt.Bucket, m *model.Message) {
	m.Replies = 0
	var key [8]byte
	binary.BigEndian.PutUint64(key[:], m.ID)
	if v := counts.Get(key[:]); len(v) == 8 {
		m.Replies = btoi(v)
	}
}

// notify writes the notifications model.Notified says message m causes,
// each with its change in the log, dropping the recipient's oldest beyond
// model.MaxNotifications, and notes whom m notified. author is m's owner's
// account; edited, whether m was written before (only then can anyone
// have been notified of it already).
func (db *DB) notify(tx *bbolt.Tx, author *model.User, m *model.Message, parentOwner uint64, edited bool) error {
	// Each bucket looked up once: a lookup walks the root's tree, and a
	// message notifies up to model.MaxMentions accounts.
	notified, notifications, marksOf := tx.Bucket(bucketNotified), tx.Bucket(bucketNotifications), tx.Bucket(bucketNotificationMarks)
	var before []byte
	var already func(uint64) bool
	if edited {
		before = notified.Get(itob(m.ID))
		already = func(userID uint64) bool { return notifiedHas(before, userID) }
	}
	ns := model.Notified(author.ID, m.Mentions, parentOwner, already)
	if len(ns) == 0 {
		return nil
	}
	list := make([]byte, len(before), len(before)+8*len(ns))
	copy(list, before)
	// One copy of the message for all its notifications as the feed holds
	// them, which nothing changes.
	msg := *m
	actor := model.Profile{ID: author.ID, Handle: author.Handle, Name: author.Name}
	changes := make([]model.Change, len(ns))
	var oldest *bbolt.Cursor
	for i := range ns {
		n := &ns[i]
		n.MessageID, n.Actor, n.Message = m.ID, actor, &msg
		ch := &changes[i]
		ch.Kind, ch.UserID, ch.Notification = model.NotificationCreated, n.UserID, n
		if err := db.appendChange(tx, ch); err != nil {
			return err
		}
		n.ID, n.At = ch.Seq, ch.At
		if err := notifications.Put(pairKey(n.UserID, n.ID), encodeNotification(n)); err != nil {
			return err
		}
		list = binary.BigEndian.AppendUint64(list, n.UserID)
		marks := readMarksIn(marksOf, n.UserID)
		marks.kept++
		for marks.kept > model.MaxNotifications {
			if oldest == nil {
				oldest = notifications.Cursor()
			}
			if err := dropOldestNotification(oldest, notified, n.UserID); err != nil {
				return err
			}
			marks.kept--
		}
		if err := marksOf.Put(itob(n.UserID), pairKey(marks.readUpTo, marks.kept)); err != nil {
			return err
		}
	}
	return notified.Put(itob(m.ID), list)
}

// notifiedHas reports whether a notified record lists userID.
func notifiedHas(list []byte, userID uint64) bool {
	for i := 0; i+8 <= len(list); i += 8 {
		if binary.BigEndian.Uint64(list[i:]) == userID {
			return true
		}
	}
	return false
}

// dropOldestNotification deletes the oldest notification account userID
// keeps, with c, a cursor of the notifications bucket.
func dropOldestNotification(c *bbolt.Cursor, notified *bbolt.Bucket, userID uint64) error {
	prefix := itob(userID)
	k, v := c.Seek(prefix)
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return fmt.Errorf("account %d keeps fewer notifications than its count says", userID)
	}
	return deleteNotification(notified, c, userID, v)
}

// deleteNotification removes the notification rec of account userID at
// c, and the account from its message's record in notified: an edit
// that mentions the account again notifies it again. The caller keeps the
// marks' count.
func deleteNotification(notified *bbolt.Bucket, c *bbolt.Cursor, userID uint64, rec []byte) error {
	if len(rec) != notificationRecordLen {
		return fmt.Errorf("account %d keeps a malformed notification", userID)
	}
	msgKey := rec[17:25]
	if list := notified.Get(msgKey); notifiedHas(list, userID) {
		kept := make([]byte, 0, len(list)-8)
		for i := 0; i+8 <= len(list); i += 8 {
			if binary.BigEndian.Uint64(list[i:]) != userID {
				kept = append(kept, list[i:i+8]...)
			}
		}
		var err error
		if len(kept) == 0 {
			err = notified.Delete(bytes.Clone(msgKey))
		} else {
			err = notified.Put(bytes.Clone(msgKey), kept)
		}
		if err != nil {
			return err
		}
	}
	return c.Delete()
}

// removeNotificationsOf removes every notification of account userID, for
// the account's deletion.
func removeNotificationsOf(tx *bbolt.Tx, userID uint64) error {
	prefix := itob(userID)
	c := tx.Bucket(bucketNotifications).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Seek(prefix) {
		if err := deleteNotification(tx.Bucket(bucketNotified), c, userID, v); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketNotificationMarks).Delete(prefix)
}

// newestNotification moves c to account userID's newest notification, so
// that Prev walks back through older ones; nil when it keeps none.
func newestNotification(c *bbolt.Cursor, userID uint64) (k, v []byte) {
	// From the key after the account's last, back one.
	if after, _ := c.Seek(itob(userID + 1)); after == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, itob(userID)) {
		return nil, nil
	}
	return k, v
}

// shownNotification fills n's actor as the account is now and reports
// whether n is shown at all: not while its actor is suspended, nor once
// the actor's account is gone.
func shownNotification(owners *ownerEmails, n *model.Notification) bool {
	card, ok := owners.card(n.Actor.ID)
	if !ok || card.suspended {
		return false
	}
	n.Actor.Handle, n.Actor.Name = card.handle, card.name
	return true
}

// joinNotificationMessage fills n.Message with its message as it is now,
// nil once it is deleted.
func joinNotificationMessage(tx *bbolt.Tx, owners *ownerEmails, n *model.Notification) {
	n.Message = nil
	if rec := tx.Bucket(bucketMessages).Get(itob(n.MessageID)); rec != nil {
		if m, err := decodeMessage(n.MessageID, rec); err == nil && owners.join(m) {
			joinRepliesIn(owners.counts, m)
			n.Message = m
		}
	}
}

// resolveNotification fills NotificationCreated change ch with its
// notification as it is now, or marks it gone.
func resolveNotification(tx *bbolt.Tx, owners *ownerEmails, ch *model.Change) {
	if ch.Notification == nil {
		ch.Gone = true
		return
	}
	rec := tx.Bucket(bucketNotifications).Get(pairKey(ch.UserID, ch.Seq))
	if rec == nil {
		ch.Gone = true
		return
	}
	n, err := decodeNotification(ch.UserID, ch.Seq, rec)
	if err != nil || !shownNotification(owners, n) {
		ch.Gone = true
		return
	}
	joinNotificationMessage(tx, owners, n)
	n.Read = n.ID <= readMarks(tx, ch.UserID).readUpTo
	ch.Notification = n
}

// Replies returns a page of the replies to q.MessageID, oldest first.
// Errors: model.ErrUnauthorized, model.ErrNotFound when the message does
// not exist and never did.
func (db *DB) Replies(_ context.Context, by model.Caller, q model.RepliesQuery) (*model.RepliesPage, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = model.DefaultSearchLimit
	}
	page := &model.RepliesPage{}
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		if _, err := db.reader(tx, by); err != nil {
			return err
		}
		msgs := tx.Bucket(bucketMessages)
		if msgs.Get(itob(q.MessageID)) == nil && (q.MessageID == 0 || q.MessageID > msgs.Sequence()) {
			return model.MessageNotFound(q.MessageID)
		}
		owners := newOwnerEmails(tx)
		prefix := itob(q.MessageID)
		c := tx.Bucket(bucketReplies).Cursor()
		for k, _ := c.Seek(pairKey(q.MessageID, q.AfterID+1)); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			id := btoi(k[8:])
			if len(page.Messages) == limit {
				page.NextAfterID = page.Messages[limit-1].ID
				break
			}
			rec := msgs.Get(itob(id))
			if rec == nil {
				return fmt.Errorf("the replies of %d list missing message %d", q.MessageID, id)
			}
			m, err := decodeMessage(id, rec)
			if err != nil {
				return err
			}
			if !owners.join(m) {
				continue // its account's deletion is removing it
			}
			joinRepliesIn(owners.counts, m)
			page.Messages = append(page.Messages, m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// Notifications returns a page of the caller's notifications, newest
// first, with the number unread. Errors: model.ErrUnauthorized.
func (db *DB) Notifications(_ context.Context, by model.Caller, q model.NotificationQuery) (*model.NotificationPage, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = model.DefaultNotificationsLimit
	}
	page := &model.NotificationPage{}
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		u, err := db.reader(tx, by)
		if err != nil {
			return err
		}
		readUpTo := readMarks(tx, u.ID).readUpTo
		owners := newOwnerEmails(tx)
		prefix := itob(u.ID)
		c := tx.Bucket(bucketNotifications).Cursor()
		k, v := newestNotification(c, u.ID)
		// At most model.MaxNotifications each: counting the unread ones
		// walks them all, but stops at the first read one once the page
		// is full, since every older one is read too.
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
			id := btoi(k[8:])
			unread := id > readUpTo
			if !unread && (q.Unread || len(page.Items) > limit) {
				break
			}
			n, err := decodeNotification(u.ID, id, v)
			if err != nil {
				return err
			}
			if !shownNotification(owners, n) {
				continue
			}
			if unread {
				page.Unread++
			}
			if q.BeforeID != 0 && id >= q.BeforeID || len(page.Items) > limit {
				continue
			}
			n.Read = !unread
			page.Items = append(page.Items, n)
		}
		if len(page.Items) > limit {
			page.Items = page.Items[:limit]
			page.NextBeforeID = page.Items[limit-1].ID
		}
		for _, n := range page.Items {
			joinNotificationMessage(tx, owners, n)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// MarkNotificationsRead marks the caller's notifications up to upTo read,
// or all of them when upTo is zero. Errors: model.ErrUnauthorized.
func (db *DB) MarkNotificationsRead(_ context.Context, by model.Caller, upTo uint64) error {
	return db.writes.update(func(tx *bbolt.Tx) error {
		u, err := db.caller(tx, by)
		if err != nil {
			return err
		}
		marks := readMarks(tx, u.ID)
		if upTo == 0 {
			k, _ := newestNotification(tx.Bucket(bucketNotifications).Cursor(), u.ID)
			if k == nil {
				return nil
			}
			upTo = btoi(k[8:])
		}
		if upTo <= marks.readUpTo {
			return nil
		}
		marks.readUpTo = upTo
		return writeMarks(tx, u.ID, marks)
	})
}

// TrimNotifications removes notifications older than keepFor, trimChunk
// per transaction, and returns how many it removed.
func (db *DB) TrimNotifications(ctx context.Context, keepFor time.Duration) (int, error) {
	if keepFor <= 0 {
		return 0, nil
	}
	removed := 0
	for {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		n := 0
		err := db.writes.update(func(tx *bbolt.Tx) error {
			n = 0
			cutoff := timeToMicros(db.clock().Add(-keepFor))
			c := tx.Bucket(bucketNotifications).Cursor()
			for k, v := c.First(); k != nil && n < trimChunk; {
				if len(k) != 16 || len(v) != notificationRecordLen {
					k, v = c.Next()
					continue // malformed: left for the check to report
				}
				if int64(binary.BigEndian.Uint64(v[1:])) >= cutoff {
					// The rest of this account's are newer: on to the next.
					k, v = c.Seek(itob(btoi(k[:8]) + 1))
					continue
				}
				userID, key := btoi(k[:8]), bytes.Clone(k)
				if err := deleteNotification(tx.Bucket(bucketNotified), c, userID, v); err != nil {
					return err
				}
				marks := readMarks(tx, userID)
				marks.kept--
				if err := writeMarks(tx, userID, marks); err != nil {
					return err
				}
				n++
				k, v = c.Seek(key)
			}
			return nil
		})
		removed += n
		if err != nil || n < trimChunk {
			return removed, err
		}
	}
}
