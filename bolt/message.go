package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	bbolt "go.etcd.io/bbolt"
)

// MaxContentChars bounds a message's content, in Unicode code points.
const MaxContentChars = 10000

// Message is a post owned by one user. OwnerEmail is joined from the owner's
// account on every read; it is not stored with the message.
type Message struct {
	ID         uint64
	OwnerID    uint64
	OwnerEmail string
	Content    string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Revision starts at 1 and grows with every change; the HTTP layer
	// derives the ETag from it.
	Revision uint64
}

// Validate reports every rule the message's client-set fields break.
func (m *Message) Validate() error {
	var v ValidationError
	validateContent(&v, m.Content)
	return v.Err()
}

func validateContent(v *ValidationError, content string) {
	switch {
	case !utf8.ValidString(content):
		v.Add("content", "must be valid UTF-8")
	case strings.TrimSpace(content) == "":
		v.Add("content", "must contain at least one non-space character")
	case utf8.RuneCountInString(content) > MaxContentChars:
		v.Add("content", fmt.Sprintf("must be at most %d characters", MaxContentChars))
	}
}

// Precondition lets a caller veto a write after seeing the current message,
// inside the write transaction; the HTTP layer uses it for If-Match. A nil
// Precondition always holds.
type Precondition func(current *Message) bool

// MessageUpdate holds the fields a PATCH may change; nil means "leave as is".
type MessageUpdate struct {
	Content *string
}

// Message record layout: a version byte, then owner, createdAt, updatedAt and
// revision (8 bytes each), then the content. Search decodes every record it
// scans, so the layout is fixed-offset binary rather than JSON.
const (
	messageRecordVersion = 1
	messageHeaderLen     = 1 + 8*4
)

func encodeMessage(m *Message) []byte {
	b := make([]byte, messageHeaderLen+len(m.Content))
	b[0] = messageRecordVersion
	binary.BigEndian.PutUint64(b[1:], m.OwnerID)
	binary.BigEndian.PutUint64(b[9:], uint64(timeToMicros(m.CreatedAt)))
	binary.BigEndian.PutUint64(b[17:], uint64(timeToMicros(m.UpdatedAt)))
	binary.BigEndian.PutUint64(b[25:], m.Revision)
	copy(b[messageHeaderLen:], m.Content)
	return b
}

// decodeMessage copies everything out of b, which bbolt only lends for the
// life of the transaction.
func decodeMessage(id uint64, b []byte) (*Message, error) {
	if len(b) < messageHeaderLen || b[0] != messageRecordVersion {
		return nil, fmt.Errorf("decode message %d: bad record", id)
	}
	return &Message{
		ID:        id,
		OwnerID:   binary.BigEndian.Uint64(b[1:]),
		CreatedAt: microsToTime(int64(binary.BigEndian.Uint64(b[9:]))),
		UpdatedAt: microsToTime(int64(binary.BigEndian.Uint64(b[17:]))),
		Revision:  binary.BigEndian.Uint64(b[25:]),
		Content:   string(b[messageHeaderLen:]),
	}, nil
}

// messageCreatedAt reads only the timestamp, so a search can skip records by
// date without copying their content.
func messageCreatedAt(b []byte) time.Time {
	return microsToTime(int64(binary.BigEndian.Uint64(b[9:])))
}

// messageByID loads a message and joins its owner's e-mail.
func messageByID(tx *bbolt.Tx, id uint64) (*Message, error) {
	b := tx.Bucket(bucketMessages).Get(itob(id))
	if b == nil {
		return nil, fmt.Errorf("message %d: %w", id, ErrNotFound)
	}
	m, err := decodeMessage(id, b)
	if err != nil {
		return nil, err
	}
	return m, joinOwner(tx, m, nil)
}

// joinOwner fills OwnerEmail, memoising per transaction when cache is given
// so a page of one author's posts reads that user once.
func joinOwner(tx *bbolt.Tx, m *Message, cache map[uint64]string) error {
	if email, ok := cache[m.OwnerID]; ok {
		m.OwnerEmail = email
		return nil
	}
	u, err := userByID(tx, m.OwnerID)
	if err != nil {
		return fmt.Errorf("message %d: owner: %w", m.ID, err)
	}
	m.OwnerEmail = u.Email
	if cache != nil {
		cache[m.OwnerID] = u.Email
	}
	return nil
}

// CreateMessage stores m as a new message owned by m.OwnerID. It sets ID,
// timestamps, Revision and OwnerEmail. Errors: ErrInvalid for bad content,
// ErrNotFound when the owner does not exist.
func (db *DB) CreateMessage(m *Message) error {
	if err := m.Validate(); err != nil {
		return err
	}
	var nm Message
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		owner, err := userByID(tx, m.OwnerID)
		if err != nil {
			return err
		}
		msgs := tx.Bucket(bucketMessages)
		id, err := msgs.NextSequence()
		if err != nil {
			return err
		}
		nm = *m
		nm.ID, nm.OwnerEmail, nm.Revision = id, owner.Email, 1
		nm.CreatedAt = db.clock()
		nm.UpdatedAt = nm.CreatedAt
		if err := msgs.Put(itob(id), encodeMessage(&nm)); err != nil {
			return err
		}
		return tx.Bucket(bucketMsgsByOwner).Put(compositeKey(nm.OwnerID, itob(id)), nil)
	})
	if err != nil {
		return err
	}
	*m = nm // only after the commit, so a failed write leaves m untouched
	return nil
}

// Message finds a message by ID. Errors: ErrNotFound.
func (db *DB) Message(id uint64) (*Message, error) {
	var m *Message
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		var err error
		m, err = messageByID(tx, id)
		return err
	})
	return m, err
}

// ownedMessage loads a message for a write by callerID, checking existence,
// ownership and the caller's precondition in that order, all inside the
// write transaction so nothing can change between check and write.
func ownedMessage(tx *bbolt.Tx, id, callerID uint64, pre Precondition) (*Message, error) {
	m, err := messageByID(tx, id)
	if err != nil {
		return nil, err
	}
	if m.OwnerID != callerID {
		return nil, fmt.Errorf("message %d belongs to another user: %w", id, ErrForbidden)
	}
	if pre != nil && !pre(m) {
		return nil, fmt.Errorf("message %d has changed: %w", id, ErrPrecondition)
	}
	return m, nil
}

// UpdateMessage applies upd to message id on behalf of callerID and returns
// the message as stored. An update that changes nothing leaves the message,
// its UpdatedAt and its Revision alone. Errors: ErrInvalid, ErrNotFound,
// ErrForbidden (not the owner), ErrPrecondition (pre refused).
func (db *DB) UpdateMessage(id, callerID uint64, upd MessageUpdate, pre Precondition) (*Message, error) {
	if upd.Content != nil {
		var v ValidationError
		validateContent(&v, *upd.Content)
		if err := v.Err(); err != nil {
			return nil, err
		}
	}
	var out *Message
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		m, err := ownedMessage(tx, id, callerID, pre)
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
		return tx.Bucket(bucketMessages).Put(itob(id), encodeMessage(m))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteMessage removes message id on behalf of callerID and returns it as
// it was. Errors: ErrNotFound, ErrForbidden, ErrPrecondition.
func (db *DB) DeleteMessage(id, callerID uint64, pre Precondition) (*Message, error) {
	var out *Message
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		m, err := ownedMessage(tx, id, callerID, pre)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketMessages).Delete(itob(id)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketMsgsByOwner).Delete(compositeKey(m.OwnerID, itob(id))); err != nil {
			return err
		}
		out = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Search limits.
const (
	DefaultSearchLimit = 20
	MaxSearchLimit     = 100
)

// SearchQuery selects messages, newest first. Zero values mean "no filter".
type SearchQuery struct {
	// Terms must all occur in the content as whole words; see Terms.
	Terms []string
	// OwnerEmail restricts results to one author, matched case-insensitively.
	OwnerEmail string
	// Since (inclusive) and Until (exclusive) bound CreatedAt.
	Since, Until time.Time
	// BeforeID resumes a previous page: only messages with smaller IDs.
	BeforeID uint64
	// Limit is the page size; zero means DefaultSearchLimit.
	Limit int
}

// SearchPage is one page of results. NextBeforeID is zero on the last page.
type SearchPage struct {
	Messages     []*Message
	NextBeforeID uint64
}

// SearchMessages pages through messages newest first. Order is by ID, which
// NextSequence hands out in commit order, so a cursor (the last ID seen)
// neither skips nor repeats a message while others are created or deleted.
func (db *DB) SearchMessages(q SearchQuery) (*SearchPage, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultSearchLimit
	}
	if limit > MaxSearchLimit {
		limit = MaxSearchLimit
	}
	page := &SearchPage{}
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		next, err := newestFirst(tx, q)
		if err != nil || next == nil {
			return err
		}
		owners := make(map[uint64]string)
		for id, b := next(); id != 0; id, b = next() {
			if b == nil {
				return fmt.Errorf("search: index points at missing message %d", id)
			}
			if !inTimeRange(messageCreatedAt(b), q.Since, q.Until) ||
				!ContainsTerms(b[messageHeaderLen:], q.Terms) {
				continue
			}
			if len(page.Messages) == limit {
				// One match beyond the page proves there is a next page.
				page.NextBeforeID = page.Messages[limit-1].ID
				return nil
			}
			m, err := decodeMessage(id, b)
			if err != nil {
				return err
			}
			if err := joinOwner(tx, m, owners); err != nil {
				return err
			}
			page.Messages = append(page.Messages, m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// newestFirst returns an iterator over candidate messages (ID and stored
// record; ID 0 ends it) in descending ID order, below q.BeforeID. It walks
// the owner index when the query names an owner, else the messages bucket
// itself, whose cursor already holds each record. It returns a nil iterator
// when nothing can match (unknown owner).
func newestFirst(tx *bbolt.Tx, q SearchQuery) (func() (uint64, []byte), error) {
	before := q.BeforeID
	if before == 0 {
		before = math.MaxUint64
	}
	if q.OwnerEmail == "" {
		c := tx.Bucket(bucketMessages).Cursor()
		k, v := seekBelow(c, itob(before))
		return func() (uint64, []byte) {
			if k == nil {
				return 0, nil
			}
			id, rec := btoi(k), v
			k, v = c.Prev()
			return id, rec
		}, nil
	}
	ownerID := tx.Bucket(bucketUsersByEmail).Get(emailKey(q.OwnerEmail))
	if ownerID == nil {
		return nil, nil
	}
	prefix := bytes.Clone(ownerID)
	msgs := tx.Bucket(bucketMessages)
	c := tx.Bucket(bucketMsgsByOwner).Cursor()
	k, _ := seekBelow(c, compositeKey(btoi(prefix), itob(before)))
	return func() (uint64, []byte) {
		if k == nil || !bytes.HasPrefix(k, prefix) {
			return 0, nil
		}
		id, rec := btoi(k[8:]), msgs.Get(k[8:])
		k, _ = c.Prev()
		return id, rec
	}, nil
}

// seekBelow positions c on the greatest key strictly less than bound.
func seekBelow(c *bbolt.Cursor, bound []byte) (key, value []byte) {
	if k, _ := c.Seek(bound); k == nil {
		return c.Last() // every key is below bound
	}
	return c.Prev()
}

func inTimeRange(t, since, until time.Time) bool {
	if !since.IsZero() && t.Before(since) {
		return false
	}
	if !until.IsZero() && !t.Before(until) {
		return false
	}
	return true
}
