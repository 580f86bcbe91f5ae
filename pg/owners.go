package pg

import (
	"context"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// Pages of messages carry their owners' e-mail addresses, handles and
// names, and joining users to every row of a page is as much of
// PostgreSQL's work as the page itself (docs/performance.md, "PostgreSQL:
// owners' addresses kept"). A message read by its ID keeps the join, which
// for one row costs no more than the owners kept would save. So each
// instance keeps the owners it has read, and a page reads from users only
// the owners it does not know, in a second statement.
//
// An account's address never changes and its ID is never given to another
// account, but its handle and name do change (UpdateProfile). A change
// notifies ownersChannel in its transaction, with the account's ID, and
// every instance's listener (changes.go) forgets that owner when it hears
// it; a listener that lost its connection forgets every owner, since it
// may have missed some. A page whose read of the owners began before an
// owner was forgotten does not keep what it read: the generation, moved
// by every forgetting, says so.

// ownersChannel is the channel a change of an account's handle or name
// notifies, with the account's ID as the payload.
const ownersChannel = "herald_owners"

// ownerEmailsKept bounds the owners an instance keeps (at most a few
// megabytes); when it is full, an eighth of them make room.
const ownerEmailsKept = 1 << 15

// ownerCard is what a message shows of its owner.
type ownerCard struct {
	email, handle, name string
}

// ownerEmails is an instance's owner ID → ownerCard.
type ownerEmails struct {
	mu sync.RWMutex
	m  map[uint64]ownerCard
	// gen moves whenever an owner is forgotten: owners read before it
	// moved may be out of date, and are not kept.
	gen uint64
}

// fill sets the owner of every message in msgs whose owner is known and
// returns the owners that are not, each once, and the generation to put
// what is read of them with.
func (o *ownerEmails) fill(msgs []*model.Message) (unknown []int64, gen uint64) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	for _, m := range msgs {
		card, ok := o.m[m.OwnerID]
		if ok {
			m.OwnerEmail, m.OwnerHandle, m.OwnerName = card.email, card.handle, card.name
			continue
		}
		if id := int64(m.OwnerID); !containsID(unknown, id) {
			unknown = append(unknown, id)
		}
	}
	return unknown, o.gen
}

func containsID(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// put keeps the owners read, unless an owner was forgotten since gen:
// then what was read may be older than the change that forgot it.
func (o *ownerEmails) put(cards map[uint64]ownerCard, gen uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if gen != o.gen {
		return
	}
	if o.m == nil {
		o.m = make(map[uint64]ownerCard)
	}
	if len(o.m)+len(cards) > ownerEmailsKept {
		drop := max(ownerEmailsKept/8, len(o.m)+len(cards)-ownerEmailsKept)
		for id := range o.m {
			if drop == 0 {
				break
			}
			delete(o.m, id)
			drop--
		}
	}
	for id, card := range cards {
		o.m[id] = card
	}
}

// forget drops owner id, whose handle or name changed.
func (o *ownerEmails) forget(id uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, id)
	o.gen++
}

// forgetAll drops every owner, when changes may have gone unheard.
func (o *ownerEmails) forgetAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.m)
	o.gen++
}

// heardOwner forgets the owner a notification on ownersChannel names.
func (db *DB) heardOwner(payload string) {
	if id, err := strconv.ParseUint(payload, 10, 64); err == nil {
		db.owners.forget(id)
	}
}

// fillOwners sets the owners' addresses, handles and names of msgs,
// reading those this instance does not know, and returns msgs without the
// messages whose owner has since been deleted: the account and its
// messages went in one transaction after the page was read, as if the
// page had been read a moment later.
func (db *DB) fillOwners(ctx context.Context, msgs []*model.Message) ([]*model.Message, error) {
	unknown, gen := db.owners.fill(msgs)
	if len(unknown) == 0 {
		return msgs, nil
	}
	read := make(map[uint64]ownerCard, len(unknown))
	err := db.readTogether(ctx, func(b *pgx.Batch) {
		b.Queue(`SELECT id, email, handle, name FROM users WHERE id = ANY($1)`, unknown)
	}, func(br pgx.BatchResults) error {
		clear(read)
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		var (
			id   int64
			card ownerCard
		)
		for rows.Next() {
			if err := scanWire(rows, &id, &card.email, &card.handle, &card.name); err != nil {
				return err
			}
			read[uint64(id)] = card
		}
		return rows.Err()
	})
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	db.owners.put(read, gen)
	kept := msgs[:0]
	for _, m := range msgs {
		if containsID(unknown, int64(m.OwnerID)) {
			card, ok := read[m.OwnerID]
			if !ok {
				continue
			}
			m.OwnerEmail, m.OwnerHandle, m.OwnerName = card.email, card.handle, card.name
		}
		kept = append(kept, m)
	}
	return kept, nil
}
