package bolt

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// revision (8 bytes each), then the content. Search decodes every record it
// scans, so the layout is fixed-offset binary rather than JSON.
const (
	messageRecordVersion = 1
	// messageRecordVersionThread is a message that answers another or
	// mentions someone: after the header, the message it answers (8
	// bytes, zero for none), the number of mentions (1 byte) and each
	// mention's account ID (8 bytes) and handle (1-byte length, then the
	// handle), then the content. A message that does neither keeps the
	// shorter record.
	messageRecordVersionThread = 2
	messageHeaderLen           = 1 + 8*4
)

func encodeMessage(m *model.Message) []byte {
	return appendMessage(make([]byte, 0, messageHeaderLen+len(m.Content)), m)
}

// appendMessage appends m's record to b; a change record embeds one.
func appendMessage(b []byte, m *model.Message) []byte {
	threaded := m.ReplyTo != 0 || len(m.Mentions) > 0
	if threaded {
		b = append(b, messageRecordVersionThread)
	} else {
		b = append(b, messageRecordVersion)
	}
	b = binary.BigEndian.AppendUint64(b, m.OwnerID)
	b = binary.BigEndian.AppendUint64(b, uint64(timeToMicros(m.CreatedAt)))
	b = binary.BigEndian.AppendUint64(b, uint64(timeToMicros(m.UpdatedAt)))
	b = binary.BigEndian.AppendUint64(b, m.Revision)
	if threaded {
		b = binary.BigEndian.AppendUint64(b, m.ReplyTo)
		b = append(b, byte(len(m.Mentions)))
		for _, mention := range m.Mentions {
			b = binary.BigEndian.AppendUint64(b, mention.UserID)
			b = append(b, byte(len(mention.Handle)))
			b = append(b, mention.Handle...)
		}
	}
	return append(b, m.Content...)
}

// decodeMessage copies everything out of b, which bbolt only lends for the
// life of the transaction.
func decodeMessage(id uint64, b []byte) (*model.Message, error) {
	m := new(model.Message)
	if err := decodeMessageInto(m, id, b); err != nil {
		return nil, err
	}
	return m, nil
}

// decodeMessageInto is decodeMessage into memory the caller provides, so
// a search can decode a page into one allocation rather than one each.
func decodeMessageInto(m *model.Message, id uint64, b []byte) error {
	bad := fmt.Errorf("decode message %d: bad record", id)
	if len(b) < messageHeaderLen || b[0] != messageRecordVersion && b[0] != messageRecordVersionThread {
		return bad
	}
	*m = model.Message{
		ID:        id,
		OwnerID:   binary.BigEndian.Uint64(b[1:]),
		CreatedAt: microsToTime(createdMicros(b)),
		UpdatedAt: microsToTime(int64(binary.BigEndian.Uint64(b[17:]))),
		Revision:  binary.BigEndian.Uint64(b[25:]),
	}
	rest := b[messageHeaderLen:]
	if b[0] == messageRecordVersionThread {
		r := recordReader{b: rest}
		m.ReplyTo = r.uint64()
		n := int(r.byte())
		if n > model.MaxMentions {
			return bad
		}
		if n > 0 {
			m.Mentions = make([]model.Mention, n)
		}
		for i := range m.Mentions {
			m.Mentions[i].UserID = r.uint64()
			m.Mentions[i].Handle = string(r.bytes(int(r.byte())))
		}
		if r.short {
			return bad
		}
		rest = r.b
	}
	m.Content = string(rest)
	return nil
}

// createdMicros is a record's creation time, read without decoding the
// rest; rec is at least messageHeaderLen bytes.
func createdMicros(rec []byte) int64 { return int64(binary.BigEndian.Uint64(rec[9:])) }

// messageByID loads a message and joins its owner's e-mail.
func messageByID(tx *bbolt.Tx, id uint64) (*model.Message, error) {
	b := tx.Bucket(bucketMessages).Get(itob(id))
	if b == nil {
		return nil, model.MessageNotFound(id)
	}
	m, err := decodeMessage(id, b)
	if err != nil {
		return nil, err
	}
	if !joinOwner(tx, m) {
		return nil, model.MessageNotFound(id)
	}
	joinReplies(tx, m)
	return m, nil
}

// messageRecord decodes message id as stored, without joining its owner.
func messageRecord(tx *bbolt.Tx, id uint64) (*model.Message, error) {
	b := tx.Bucket(bucketMessages).Get(itob(id))
	if b == nil {
		return nil, fmt.Errorf("an index points at missing message %d", id)
	}
	return decodeMessage(id, b)
}

// CreateMessage stores content as a new message owned by the caller and
// returns it as stored. Errors: model.ErrInvalid for bad content, model.ErrUnauthorized
// or model.ErrNotFound when the caller does not resolve to a user.
func (db *DB) CreateMessage(_ context.Context, by model.Caller, content string) (*model.Message, error) {
	return db.create(by, model.Draft{Content: content}, nil)
}

// CreateMessageWithKey is CreateMessage made with an Idempotency-Key:
// when the caller's live record of key says a create made a message, it
// returns that message as the first answer showed it, rebuilt with
// content, and writes nothing; otherwise it creates the message and the
// record in one transaction. Errors: as CreateMessage, and
// model.ErrKeyReused when the record is of another request.
func (db *DB) CreateMessageWithKey(_ context.Context, by model.Caller, content string, key model.IdempotencyKey) (*model.Message, error) {
	return db.create(by, model.Draft{Content: content}, &key)
}

// PostMessage stores draft as a new message of the caller's, made with
// key or without (nil): a reply when draft.ReplyTo is set, notifying whom
// it mentions and whom it answers in the same transaction. Errors: as
// CreateMessageWithKey, and model.ErrInvalid naming replyTo when the
// message it answers does not exist.
func (db *DB) PostMessage(_ context.Context, by model.Caller, draft model.Draft, key *model.IdempotencyKey) (*model.Message, error) {
	return db.create(by, draft, key)
}

// create stores draft as a new message of the caller's, made with key or
// without (nil): see CreateMessageWithKey.
func (db *DB) create(by model.Caller, draft model.Draft, key *model.IdempotencyKey) (*model.Message, error) {
	if err := draft.Validate(); err != nil {
		return nil, err
	}
	terms := model.SortedTerms(draft.Content)
	var out *model.Message
	err := db.writes.create(func(tx *bbolt.Tx) error {
		owner, err := db.caller(tx, by)
		if err != nil {
			return err
		}
		if key == nil {
			out, err = db.insertMessage(tx, owner, draft, terms)
			return err
		}
		out, err = db.insertMessageOnce(tx, owner, draft, terms, key)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// insertMessage stores a new message of owner with its index entries, its
// place among the replies of the message it answers and the notifications
// it causes. terms is model.SortedTerms(draft.Content).
func (db *DB) insertMessage(tx *bbolt.Tx, owner *model.User, draft model.Draft, terms []string) (*model.Message, error) {
	msgs := tx.Bucket(bucketMessages)
	id, err := msgs.NextSequence()
	if err != nil {
		return nil, err
	}
	m := &model.Message{ID: id, OwnerID: owner.ID, OwnerEmail: owner.Email, OwnerHandle: owner.Handle, OwnerName: owner.Name,
		Content: draft.Content, ReplyTo: draft.ReplyTo, Revision: 1}
	m.CreatedAt = db.creationTime(tx)
	m.UpdatedAt = m.CreatedAt
	var parentOwner uint64
	if m.ReplyTo != 0 {
		if parentOwner, err = addReply(tx, m); err != nil {
			return nil, err
		}
	}
	m.Mentions = resolveMentions(tx, m.Content, nil)
	if err := msgs.Put(itob(id), encodeMessage(m)); err != nil {
		return nil, err
	}
	if err := db.indexNewMessage(tx, m, terms); err != nil {
		return nil, err
	}
	if err := db.recordChange(tx, model.MessageCreated, m); err != nil {
		return nil, err
	}
	if len(m.Mentions) > 0 || parentOwner != 0 {
		return m, db.notify(tx, owner, m, parentOwner, false)
	}
	return m, nil
}

// creationTime is now, or the newest message's creation time if the clock
// has gone back since (an NTP step, say). Search relies on creation times
// never falling as IDs rise: it turns since/until into ID bounds. (A
// deleted newest message does not count: only stored messages are
// searched.)
func (db *DB) creationTime(tx *bbolt.Tx) time.Time {
	now := db.clock()
	if _, v := lastEntry(tx.Bucket(bucketMessages).Cursor()); len(v) >= messageHeaderLen {
		if newest := microsToTime(createdMicros(v)); now.Before(newest) {
			return newest
		}
	}
	return now
}

// Message reads message id for the caller, whose account it returns,
// resolved in the same read transaction: one transaction, not two, on the
// hot path of GET /api/messages/{id}. Errors: model.ErrUnauthorized,
// model.ErrNotFound.
func (db *DB) Message(_ context.Context, by model.Caller, id uint64) (*model.User, *model.Message, error) {
	var (
		u   *model.User
		m   *model.Message
		err error
	)
	err = db.bolt.View(func(tx *bbolt.Tx) error {
		if u, err = db.reader(tx, by); err != nil {
			return err
		}
		m, err = messageByID(tx, id)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return u, m, nil
}

// ownedMessage loads a message for a write, resolving the caller and
// checking existence, ownership and the caller's precondition in that order,
// all inside the write transaction so nothing can change between check and
// write. With moderation, an administrator other than the owner may have
// the message too. It returns the caller's account with the message.
func (db *DB) ownedMessage(tx *bbolt.Tx, id uint64, by model.Caller, pre model.Precondition, moderation bool) (*model.User, *model.Message, error) {
	u, err := db.caller(tx, by)
	if err != nil {
		return nil, nil, err
	}
	m, err := messageByID(tx, id)
	if err != nil {
		return nil, nil, err
	}
	if err := model.CheckWriter(u, m, moderation); err != nil {
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
// model.ErrUnauthorized, model.ErrNotFound, model.ErrForbidden (not the owner),
// model.ErrPrecondition (pre refused).
func (db *DB) UpdateMessage(_ context.Context, id uint64, by model.Caller, upd model.MessageUpdate, pre model.Precondition) (*model.Message, error) {
	if upd.Content != nil {
		var v model.ValidationError
		v.CheckContent("content", *upd.Content)
		if err := v.Err(); err != nil {
			return nil, err
		}
	}
	var newTerms []string
	if upd.Content != nil {
		newTerms = model.SortedTerms(*upd.Content)
	}
	var out *model.Message
	err := db.writes.update(func(tx *bbolt.Tx) error {
		author, m, err := db.ownedMessage(tx, id, by, pre, false)
		if err != nil {
			return err
		}
		out = m
		if upd.Content == nil || *upd.Content == m.Content {
			return nil
		}
		if err := db.reindexContent(tx, m, newTerms); err != nil {
			return err
		}
		m.Content = *upd.Content
		m.UpdatedAt = db.clock()
		m.Revision++
		m.Mentions = resolveMentions(tx, m.Content, m.Mentions)
		if err := tx.Bucket(bucketMessages).Put(itob(id), encodeMessage(m)); err != nil {
			return err
		}
		if err := db.recordChange(tx, model.MessageUpdated, m); err != nil {
			return err
		}
		if len(m.Mentions) == 0 {
			return nil
		}
		// Only the owner edits (no moderation): the caller is the author.
		return db.notify(tx, author, m, 0, true)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteMessage removes message id and its index entries on behalf of the
// caller, its owner or an administrator, whose act the audit log records,
// and returns it as it was. Errors: model.ErrUnauthorized,
// model.ErrNotFound, model.ErrForbidden, model.ErrPrecondition.
func (db *DB) DeleteMessage(_ context.Context, id uint64, by model.Caller, pre model.Precondition) (*model.Message, error) {
	var out *model.Message
	err := db.writes.update(func(tx *bbolt.Tx) error {
		u, m, err := db.ownedMessage(tx, id, by, pre, true)
		if err != nil {
			return err
		}
		if err := db.removeMessage(tx, m); err != nil {
			return err
		}
		if m.OwnerID != u.ID {
			entry := &model.AuditEntry{Action: model.AuditDeleteMessage, MessageID: m.ID, UserID: m.OwnerID, UserEmail: m.OwnerEmail}
			if err := db.appendAudit(tx, u, entry); err != nil {
				return err
			}
		}
		out = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
