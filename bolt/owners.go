package bolt

import (
	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// Owners: every message a store returns carries its owner's e-mail
// address, read from the owner's record in the transaction that read the
// message, so a message whose owner is gone is gone too.

// joinOwner fills OwnerEmail, OwnerHandle and OwnerName. It reports false for a message whose owner
// is gone: the account was deleted and its messages are being removed (see
// DeleteAccount), so the message no longer exists for anyone.
func joinOwner(tx *bbolt.Tx, m *model.Message) bool {
	return newOwnerEmails(tx).join(m)
}

// ownerEmails joins messages to their owners' e-mails within one
// transaction, reading each owner once. A page has a handful of authors, so
// a short list scanned in order serves better than a map, whose inserts
// cost more than the scan
// (docs/performance.md, "bbolt: reading a page of messages").
type ownerEmails struct {
	users idReader
	seen  []ownerEmail
	// counts is the reply_counts bucket, for the messages joined with
	// their owners to be joined with their counts of replies too.
	counts *bbolt.Bucket
}

type ownerEmail struct {
	id   uint64
	card ownerCard
}

func newOwnerEmails(tx *bbolt.Tx) *ownerEmails {
	return &ownerEmails{users: newIDReader(tx.Bucket(bucketUsers)), counts: tx.Bucket(bucketReplyCounts)}
}

// join is joinOwner for a message read in the transaction o was made in.
func (o *ownerEmails) join(m *model.Message) bool {
	card, ok := o.card(m.OwnerID)
	if ok {
		m.OwnerEmail, m.OwnerHandle, m.OwnerName = card.email, card.handle, card.name
	}
	return ok
}

// card reads account id's ownerCard, false when the account is gone.
func (o *ownerEmails) card(id uint64) (ownerCard, bool) {
	for _, seen := range o.seen {
		if seen.id == id {
			return seen.card, true
		}
	}
	card, ok := readOwnerCard(o.users.get(id))
	if !ok {
		return ownerCard{}, false
	}
	o.seen = append(o.seen, ownerEmail{id, card})
	return card, true
}
