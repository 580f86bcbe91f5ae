package model

import (
	"errors"
	"fmt"
	"time"
)

// ChangeKind says what happened.
type ChangeKind uint8

// The kinds of change, with their event names on the live stream.
const (
	MessageCreated ChangeKind = iota + 1
	MessageUpdated
	MessageDeleted
	// TokensRevoked: tokens of the account UserID stopped working before
	// their time (a logout, a revocation, a password change, the account
	// deleted). It is never sent to a client: it tells every live stream,
	// in whatever process reads the log, to check its own token.
	TokensRevoked
)

// Internal reports whether changes of kind k are for Herald itself and
// never reach a client.
func (k ChangeKind) Internal() bool { return k == TokensRevoked }

func (k ChangeKind) String() string {
	switch k {
	case MessageCreated:
		return "message.created"
	case MessageUpdated:
		return "message.updated"
	case MessageDeleted:
		return "message.deleted"
	case TokensRevoked:
		return "tokens.revoked"
	}
	return fmt.Sprintf("ChangeKind(%d)", uint8(k))
}

// Change is one committed change, as a store's change log keeps it for
// live streams: to a message, or to an account's tokens.
type Change struct {
	Seq  uint64 // position in the log, from 1, rising in commit order
	Kind ChangeKind
	At   time.Time // when it committed
	// Message is the message after the change; for a deletion, as it was
	// last stored. OwnerEmail is kept with the change, so it is known even
	// after the owner's account is gone.
	Message Message
	// Before is the content an update replaced (empty otherwise), so a
	// reader filtering by words can tell a message that stopped matching.
	Before string
	// UserID is the account whose tokens a TokensRevoked change concerns;
	// zero for the changes of messages, whose owner is Message.OwnerID.
	UserID uint64
}

// ErrChangeUnknown is a store's answer to a request for the changes after a
// position its log does not hold: older than what trimming kept, or beyond the newest change (an
// ID from another server or an older backup). A reader starts again from
// the head.
var ErrChangeUnknown = errors.New("the change log does not hold that position")
