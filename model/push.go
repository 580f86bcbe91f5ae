package model

import (
	"fmt"
	"strings"
	"time"
)

// Web Push: the server's VAPID key pair, the browsers' subscriptions, and
// the deliveries the sender has queued from the change log.

// MaxPushSubscriptions is how many push subscriptions an account may hold
// (a phone, a laptop, a few browsers).
const MaxPushSubscriptions = 10

// PushTTL is how long a push service is asked to keep a push for a device
// that is offline, and how long the sender tries one that fails for a
// while: past it, a notification is news no more.
const PushTTL = 24 * time.Hour

// VAPIDKeys is the server's one key pair for signing to push services
// (RFC 8292): a P-256 private scalar (32 bytes) and its public point,
// uncompressed (65 bytes). The private key never leaves the store and the
// sender.
type VAPIDKeys struct {
	Private []byte
	Public  []byte
}

// PushSubscription is a browser's PushSubscription, kept for the account
// that registered it. Endpoint is unique across accounts.
type PushSubscription struct {
	ID       uint64
	UserID   uint64
	Endpoint string
	P256dh   []byte // the browser's ECDH public key, uncompressed P-256 (65 bytes)
	Auth     []byte // the browser's authentication secret (16 bytes)
	// ExpirationTime is when the browser says the subscription ends; zero
	// when it does not say.
	ExpirationTime time.Time
	CreatedAt      time.Time
	// LastSuccessAt is when a push service last took a push for it; zero
	// when none has yet.
	LastSuccessAt time.Time
}

// PushSubscriptionLimit refuses an account's subscription beyond
// MaxPushSubscriptions.
func PushSubscriptionLimit() error {
	return &Error{Kind: ErrConflict, Field: "endpoint", Detail: fmt.Sprintf(
		"an account may hold at most %d push subscriptions; remove one first", MaxPushSubscriptions)}
}

// PushSubscriptionNotFound refuses an act on a subscription the caller
// does not hold.
func PushSubscriptionNotFound(id uint64) error {
	return Errorf(ErrNotFound, "push subscription %d does not exist", id)
}

// PushNotice is one notification the sender found in the change log, to
// be pushed to every subscription its account holds when it is queued.
type PushNotice struct {
	NotificationID uint64 // its change's position
	UserID         uint64
	Kind           NotificationKind
	// Payload is the JSON the push carries, made when it is queued.
	Payload []byte
	// Expires is when the sender stops trying: the notification's time
	// plus PushTTL.
	Expires time.Time
}

// PushDelivery is a push queued for one subscription and not yet done.
type PushDelivery struct {
	NotificationID uint64
	SubscriptionID uint64
	Kind           NotificationKind
	Payload        []byte
	Expires        time.Time
	// Attempts is how many times a push service was asked and answered
	// "later" (429, 5xx) or could not be reached.
	Attempts int
	// NotBefore is when it may be sent: after a retry's wait, or after
	// the lease of a sender that claimed it and never said how it went.
	NotBefore time.Time
	// Subscription is the subscription it goes to, as it is when the
	// delivery is claimed.
	Subscription PushSubscription
}

// PushOutcome is how a delivery ended, or that it is to be tried again.
type PushOutcome uint8

// The outcomes of a push.
const (
	// PushDelivered: the push service took it (201, 202). The delivery
	// is done and the subscription's LastSuccessAt set.
	PushDelivered PushOutcome = iota + 1
	// PushSubscriptionGone: the push service no longer knows the
	// subscription (404, 410): it is deleted with its deliveries.
	PushSubscriptionGone
	// PushDropped: this push is given up (another 4xx, a private
	// address, past its TTL); the subscription stays.
	PushDropped
	// PushRetry: to be tried again at the time given (429, 5xx, no
	// answer).
	PushRetry
)

// PushOrigin is the push service an endpoint belongs to: its scheme and
// host (with a port when it has one), as the sender groups pushes and a
// store leaves a busy one's out of a claim. A store that matches it in
// its own language must agree with this on every endpoint it holds.
func PushOrigin(endpoint string) string {
	scheme, rest, ok := strings.Cut(endpoint, "://")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return scheme + "://" + rest
}
