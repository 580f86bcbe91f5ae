package model

import (
	"errors"
	"fmt"
	"time"
)

// ChangeKind says what happened to a message.
type ChangeKind uint8

// The kinds of change, with their event names on the live stream.
const (
	MessageCreated ChangeKind = iota + 1
	MessageUpdated
	MessageDeleted
)

func (k ChangeKind) String() string {
	switch k {
	case MessageCreated:
		return "message.created"
	case MessageUpdated:
		return "message.updated"
	case MessageDeleted:
		return "message.deleted"
	}
	return fmt.Sprintf("ChangeKind(%d)", uint8(k))
}

// Change is one committed change to a message, as a store's change log
// keeps it for live streams.
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
}

// ErrChangeUnknown is a store's answer to a request for the changes after a
// position its log does not hold: older than what trimming kept, or beyond the newest change (an
// ID from another server or an older backup). A reader starts again from
// the head.
var ErrChangeUnknown = errors.New("the change log does not hold that position")
