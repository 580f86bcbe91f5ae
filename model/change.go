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
	// SettingsChanged: an administrator changed the settings (Settings).
	// It carries nothing and is never sent to a client: it wakes every
	// process that reads the log, whose server then reads the settings
	// again.
	SettingsChanged
	// NotificationCreated: UserID was notified (Notification). Only
	// UserID's own streams hear of it.
	NotificationCreated
)

// Internal reports whether changes of kind k are for Herald itself and
// never reach a client.
func (k ChangeKind) Internal() bool { return k == TokensRevoked || k == SettingsChanged }

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
	case SettingsChanged:
		return "settings.changed"
	case NotificationCreated:
		return "notification"
	}
	return fmt.Sprintf("ChangeKind(%d)", uint8(k))
}

// Change is one committed change, as a store's change log keeps it for
// live streams: to a message, or to an account's tokens.
//
// The log keeps a message's content in one change only, its newest: the
// write that edits or deletes a message scrubs the content from the
// change before, so nothing edited away or deleted stays in the log (or in
// a copy of the database). A deletion carries no content at all.
type Change struct {
	Seq  uint64 // position in the log, from 1, rising in commit order
	Kind ChangeKind
	At   time.Time // when it committed
	// Message is the message after the change; a deletion's holds only
	// its ID, owner and times. OwnerEmail is kept with the change, so it
	// is known even after the owner's account is gone, unless the
	// deletion is of a deleted account's message, whose e-mail the log
	// does not keep ("" then).
	Message Message
	// Scrubbed says the message was edited or deleted after this change,
	// and the log holds none of its content. ChangesAfter fills Message
	// with the message as it is now when it still exists, and sets Gone
	// when it does not.
	Scrubbed bool
	Gone     bool
	// UserID is the account whose tokens a TokensRevoked change concerns,
	// or who a NotificationCreated change notifies; zero for the changes
	// of messages, whose owner is Message.OwnerID.
	UserID uint64
	// Notification is a NotificationCreated change's notification, as it
	// is when the change is read: its actor's current name, its message
	// as it is now (nil once deleted). Gone is set instead when the
	// notification is no longer for anyone to see: removed, or its actor
	// suspended or deleted.
	Notification *Notification
}

// ChangeBatchBytes bounds the content a store's ChangesAfter returns at
// once, whatever count it is asked for: one message may hold 40 KB of
// text, which JSON may escape to six times as many bytes, and a reader
// holds what it is given while it renders and writes it. A change bigger
// than the bound on its own still comes, alone.
const ChangeBatchBytes = 64 << 10

// ChangeBytes is what ch counts against ChangeBatchBytes.
func ChangeBytes(ch *Change) int {
	n := len(ch.Message.Content) + len(ch.Message.OwnerEmail)
	if ch.Notification != nil && ch.Notification.Message != nil {
		n += len(ch.Notification.Message.Content) + len(ch.Notification.Message.OwnerEmail)
	}
	return n
}

// ErrChangeUnknown is a store's answer to a request for the changes after a
// position its log does not hold: older than what trimming kept, or beyond the newest change (an
// ID from another server or an older backup). A reader starts again from
// the head.
var ErrChangeUnknown = errors.New("the change log does not hold that position")
