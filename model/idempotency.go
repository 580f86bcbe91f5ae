package model

import "time"

// IdempotencyWindow is how long a create made with an Idempotency-Key is
// remembered: a retry with the same key and request within it gets the
// first answer and writes nothing; after it the key is a new key.
const IdempotencyWindow = 24 * time.Hour

// IdempotencyKey is a create's Idempotency-Key as a store keeps it. The
// key as sent is never stored: only its hash, by which its account's
// record is found, and the fingerprint of the request it came with.
type IdempotencyKey struct {
	// ID is the SHA-256 of the key as sent.
	ID [32]byte
	// Fingerprint identifies the request: an HMAC, keyed with the key
	// itself, of what the request asked for (see http's fingerprint).
	// Keyed so, a stored fingerprint cannot confirm a guess at the
	// content of a message without the key, which only the client holds.
	Fingerprint [32]byte
}

// IdempotencyRecord is what a store remembers of a create made with a
// key, for IdempotencyWindow: never the content, which the retry sends
// again, so nothing of a message deleted or edited since survives in it.
type IdempotencyRecord struct {
	UserID uint64
	Key    IdempotencyKey
	// ResourceID is the ID of what the create made (a message).
	ResourceID uint64
	// CreatedAt is when: the message's creation time.
	CreatedAt time.Time
}

// Live reports whether the record still answers retries at now.
func (r *IdempotencyRecord) Live(now time.Time) bool {
	return now.Before(r.CreatedAt.Add(IdempotencyWindow))
}

// Replay answers a retry that r's key and fingerprint match: the message
// the create made, as its first answer showed it, rebuilt from r, the
// draft the retry sends (the first request's, as the fingerprint shows)
// and the owner's account. The store fills its mentions. Errors:
// ErrKeyReused when the retry's fingerprint is another request's.
func (r *IdempotencyRecord) Replay(key IdempotencyKey, owner *User, draft Draft) (*Message, error) {
	if r.Key.Fingerprint != key.Fingerprint {
		return nil, KeyReused()
	}
	return &Message{ID: r.ResourceID, OwnerID: owner.ID, OwnerEmail: owner.Email, OwnerHandle: owner.Handle, OwnerName: owner.Name,
		Content: draft.Content, ReplyTo: draft.ReplyTo, CreatedAt: r.CreatedAt, UpdatedAt: r.CreatedAt, Revision: 1}, nil
}
