package model

import (
	"fmt"
	"time"
)

// Draft is a message as its author sends it to be created.
type Draft struct {
	Content string
	// ReplyTo is the message the draft answers; zero for none.
	ReplyTo uint64
}

// Validate reports every rule the draft breaks that needs no store.
func (d *Draft) Validate() error {
	var v ValidationError
	v.CheckContent("content", d.Content)
	return v.Err()
}

// Mention is an account a message names with @handle, as the message was
// written: Handle is the handle its content spells.
type Mention struct {
	UserID uint64
	Handle string
}

// Profile is what anyone signed in may see of an account.
type Profile struct {
	ID        uint64
	Handle    string
	Name      string
	CreatedAt time.Time
}

// NotificationKind says why a person was notified.
type NotificationKind uint8

// The kinds of notification, as the API names them.
const (
	NotifyMention NotificationKind = iota + 1
	NotifyReply
)

func (k NotificationKind) String() string {
	switch k {
	case NotifyMention:
		return "mention"
	case NotifyReply:
		return "reply"
	}
	return fmt.Sprintf("NotificationKind(%d)", uint8(k))
}

// Notification tells UserID that Actor mentioned them in, or replied to
// them with, message MessageID. Its ID is the position of its change in
// the log, so IDs rise in commit order on every store and a stream resumes
// across notifications as across messages.
type Notification struct {
	ID        uint64
	UserID    uint64
	Kind      NotificationKind
	At        time.Time
	Actor     Profile // Actor.CreatedAt is not filled
	MessageID uint64
	// Message is the message as it is now; nil once it is deleted.
	Message *Message
	Read    bool
}

// Notification limits: an account keeps at most MaxNotifications (the
// oldest go first), each for DefaultNotificationsKeep unless the operator
// says otherwise.
const (
	MaxNotifications          = 1000
	DefaultNotificationsKeep  = 90 * 24 * time.Hour
	DefaultNotificationsLimit = 20
	MaxNotificationsLimit     = 100
)

// NotificationQuery selects an account's notifications, newest first.
type NotificationQuery struct {
	// BeforeID resumes a previous page: only notifications with smaller IDs.
	BeforeID uint64
	Limit    int
	// Unread leaves out the notifications already read.
	Unread bool
}

// NotificationPage is one page of notifications; NextBeforeID is zero on
// the last. Unread counts every unread notification the account has, not
// only this page's.
type NotificationPage struct {
	Items        []*Notification
	NextBeforeID uint64
	Unread       int
}

// RepliesQuery selects the replies to a message, oldest first.
type RepliesQuery struct {
	MessageID uint64
	// AfterID resumes a previous page: only replies with greater IDs.
	AfterID uint64
	Limit   int
}

// RepliesPage is one page of replies; NextAfterID is zero on the last.
type RepliesPage struct {
	Messages    []*Message
	NextAfterID uint64
}

// Notified says whom a message notifies, and why: everyone it mentions
// but its author, then the owner of the message it answers (parentOwner,
// zero for none) unless that is its author or already mentioned. An edit
// passes the accounts the message already notified as already; they are
// never notified again about it.
func Notified(author uint64, mentions []Mention, parentOwner uint64, already func(userID uint64) bool) []Notification {
	var out []Notification
	has := func(id uint64) bool {
		for _, n := range out {
			if n.UserID == id {
				return true
			}
		}
		return false
	}
	for _, m := range mentions {
		if m.UserID == author || has(m.UserID) || already != nil && already(m.UserID) {
			continue
		}
		out = append(out, Notification{UserID: m.UserID, Kind: NotifyMention})
	}
	if parentOwner != 0 && parentOwner != author && !has(parentOwner) && (already == nil || !already(parentOwner)) {
		out = append(out, Notification{UserID: parentOwner, Kind: NotifyReply})
	}
	return out
}

// ReplyToNotFound refuses a reply to a message that does not exist.
func ReplyToNotFound(id uint64) error {
	var v ValidationError
	v.Add("replyTo", fmt.Sprintf("message %d does not exist; a reply must answer an existing message", id))
	return v.Err()
}
