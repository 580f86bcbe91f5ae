package model

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxContentChars bounds a message's content, in Unicode code points.
const MaxContentChars = 10000

// Message is a post owned by one user. OwnerEmail is the owner's e-mail as
// the account has it when the message is read: a store joins it from the
// account rather than keep a copy with the message.
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

// Message record layout: a version byte, then owner, createdAt, updatedAt and

// Caller is who an operation is made for. A store resolves it inside the
// operation's own transaction: a token revoked while a write waited cannot
// complete it, and a read checks its token in the snapshot it reads.
type Caller struct {
	userID uint64
	token  *TokenHash
	server bool
}

// ByToken is the caller holding the bearer token with this hash: every write
// a client asks for. The token is checked again inside the write's
// transaction, so a logout that committed first wins.
func ByToken(hash TokenHash) Caller { return Caller{token: &hash} }

// ByUser is user id acting without a token: for tools and tests that act
// for an account directly.
func ByUser(id uint64) Caller { return Caller{userID: id} }

// ByServer is the service itself, acting for no account: its tools, its
// chores and tests reading what is stored, and the operator on the
// server's machine (herald admin). A store answers its reads with no
// user, refuses it the writes of an account (it has none), and lets it
// make administrative acts, which the audit log records as made on the
// server's machine. No request can make one. (The zero Caller is nobody,
// and every store refuses it.)
func ByServer() Caller { return Caller{server: true} }

// Server reports whether the caller is ByServer's.
func (c Caller) Server() bool { return c.server }

// Token returns the hash of the caller's bearer token, and false for a
// caller made with ByUser.
func (c Caller) Token() (TokenHash, bool) {
	if c.token == nil {
		return TokenHash{}, false
	}
	return *c.token, true
}

// UserID is the account of a caller made with ByUser; zero for one made
// with ByToken, whose account the store finds from the token.
func (c Caller) UserID() uint64 { return c.userID }
