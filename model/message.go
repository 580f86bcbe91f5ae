package model

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxContentChars bounds a message's content, in Unicode code points.
const MaxContentChars = 10000

// Message is a post owned by one user. OwnerEmail, OwnerHandle and
// OwnerName are the owner's as the account has them when the message is
// read: a store joins them from the account rather than keep a copy with
// the message.
type Message struct {
	ID          uint64
	OwnerID     uint64
	OwnerEmail  string
	OwnerHandle string
	OwnerName   string
	Content     string
	// ReplyTo is the message this one answers, zero for none; it never
	// changes, and keeps the ID when that message is deleted.
	ReplyTo uint64
	// Replies counts the messages that answer this one now.
	Replies uint64
	// Mentions are the accounts the content names with @handle, resolved
	// when the content was written, in order of first appearance.
	Mentions  []Mention
	CreatedAt time.Time
	UpdatedAt time.Time
	// Revision starts at 1 and grows with every change; the HTTP layer
	// derives the ETag from it.
	Revision uint64
}

// Validate reports every rule the message's client-set fields break.
func (m *Message) Validate() error {
	var v ValidationError
	v.CheckContent("content", m.Content)
	return v.Err()
}

// CheckContent adds to v a violation naming field when content breaks the
// rules for a message's content.
func (v *ValidationError) CheckContent(field, content string) {
	switch {
	case !utf8.ValidString(content):
		v.Add(field, "must be valid UTF-8")
	case strings.TrimSpace(content) == "":
		v.Add(field, "must contain at least one non-space character")
	case utf8.RuneCountInString(content) > MaxContentChars:
		v.Add(field, fmt.Sprintf("must be at most %d characters", MaxContentChars))
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
